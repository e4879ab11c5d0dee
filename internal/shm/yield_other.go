//go:build !linux

package shm

import "runtime"

// Yield gives the processor to another goroutine.
func Yield() { runtime.Gosched() }
