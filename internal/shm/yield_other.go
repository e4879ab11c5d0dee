//go:build !linux

package shm

import "runtime"

// schedYield gives the processor to another goroutine.
func schedYield() { runtime.Gosched() }
