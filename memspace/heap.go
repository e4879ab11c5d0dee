package memspace

import "fmt"

// GoHeap is the pseudo-space of Go memory viewed through FromSlice. It is
// host-accessible and pageable; it allocates nothing (Allocate returns
// ErrNotSupported) and frees nothing. Transfers treat it like any host
// space. Backends that hand memory to foreign code asynchronously must pin
// GoHeap blocks (runtime.Pinner) or copy them.
var GoHeap Space = goHeap{}

type goHeap struct{}

func (goHeap) Name() string { return "go-heap" }

func (goHeap) Properties() Properties {
	return Properties{Kind: "host", Device: -1, HostAccessible: true, Pageable: true, Atomics: true, Alignment: 1}
}

func (goHeap) Allocate(size, align int) (Block, error) {
	return Block{}, fmt.Errorf("memspace: go-heap allocates nothing (use FromSlice): %w", ErrNotSupported)
}

func (goHeap) Free(b Block) error {
	return fmt.Errorf("memspace: go-heap memory is freed by the garbage collector: %w", ErrDoubleFree)
}
