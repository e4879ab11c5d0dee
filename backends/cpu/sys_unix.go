//go:build unix && !(linux && (amd64 || arm64 || riscv64 || ppc64le || loong64))

package cpu

import (
	"sync"
	"syscall"
	"unsafe"
)

// On other Unix systems the space uses syscall.Mmap, which can only unmap a
// whole mapping: an alignment above the page size over-maps and keeps the
// whole mapping (address space, not memory: untouched pages cost nothing).

var (
	mapsMu sync.Mutex
	maps   = map[uintptr][]byte{}
)

func sysMap(size, align uintptr) (mapping, error) {
	over := size
	if align > pageSize {
		over = size + align - pageSize
		if over < size {
			return mapping{}, syscall.ENOMEM
		}
	}
	if over > uintptr(^uint(0)>>1) {
		return mapping{}, syscall.ENOMEM
	}
	b, err := syscall.Mmap(-1, 0, int(over), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return mapping{}, err
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mapsMu.Lock()
	maps[base] = b
	mapsMu.Unlock()
	addr := (base + align - 1) &^ (align - 1)
	return mapping{addr: addr, size: size, base: base, len: over}, nil
}

func sysUnmap(m mapping) error {
	mapsMu.Lock()
	b, ok := maps[m.base]
	delete(maps, m.base)
	mapsMu.Unlock()
	if !ok {
		return syscall.EINVAL
	}
	return syscall.Munmap(b)
}

func sysHugePages(addr, size uintptr) {}

func hostPointer(addr uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

const sysHasMmap = true
