package memspace_test

import (
	"testing"
	"unsafe"

	"github.com/xpu-go/xpu/memspace"
)

// A Block is five words, one more than the compiler keeps in registers:
// a function that takes one stores it to its frame with 8-byte moves, and
// an inlined method of it (HostPointer, Len) copies it from there with
// 16-byte moves, which cannot be forwarded from the stores and wait for
// them to reach the cache. Bytes, a call, reads the fields where they are.
// BenchmarkBlockViewInlined against BenchmarkBlockViewBytes is that stall
// (ADR 47): on the project's VM, 12-13 ns against 4.7 ns.

//go:noinline
func viewInlined(b memspace.Block) []byte {
	if p := b.HostPointer(); p != nil {
		return unsafe.Slice((*byte)(p), b.Len())
	}
	return nil
}

//go:noinline
func viewBytes(b memspace.Block) []byte {
	if d, err := b.Bytes(); err == nil {
		return d
	}
	return nil
}

var viewSink []byte

// BenchmarkBlockViewInlined is the host view of a Block, passed to a
// function, through its inlined methods.
func BenchmarkBlockViewInlined(b *testing.B) {
	blk := hostBlock(memspace.GoHeap, make([]byte, 8))
	for b.Loop() {
		viewSink = viewInlined(blk)
	}
	if len(viewSink) != 8 {
		b.Fatalf("view of %d bytes, want 8", len(viewSink))
	}
}

// BenchmarkBlockViewBytes is the same view through Bytes.
func BenchmarkBlockViewBytes(b *testing.B) {
	blk := hostBlock(memspace.GoHeap, make([]byte, 8))
	for b.Loop() {
		viewSink = viewBytes(blk)
	}
	if len(viewSink) != 8 {
		b.Fatalf("view of %d bytes, want 8", len(viewSink))
	}
}

