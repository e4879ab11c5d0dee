//go:build !unix

package cpu

import (
	"errors"
	"unsafe"
)

// Systems without mmap have no off-heap host space: NewSpace works, and
// every Allocate fails with ErrNotSupported.

var errNoMmap = errors.New("no mmap on this system")

func sysMap(size, align uintptr) (mapping, error) { return mapping{}, errNoMmap }

func sysUnmap(m mapping) error { return errNoMmap }

func sysHugePages(addr, size uintptr) {}

func hostPointer(addr uintptr) unsafe.Pointer { return nil }

const sysHasMmap = false
