//go:build !race

package shm

// RaceRelease does nothing without the race detector (see race.go).
func RaceRelease() {}

// RaceAcquire does nothing without the race detector (see race.go).
func RaceAcquire() {}
