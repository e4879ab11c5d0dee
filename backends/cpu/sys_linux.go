//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || loong64)

package cpu

import (
	"syscall"
	"unsafe"
)

// On 64-bit Linux the space calls mmap, munmap and madvise directly rather
// than through syscall.Mmap: syscall.Mmap only unmaps whole mappings, and
// alignment above the page size over-maps and then trims the head and the
// tail, leaving exactly the pages the block needs mapped.

// sysMap maps size bytes (a multiple of the page size) of zeroed memory at
// an address aligned to align (a power of two, at least the page size).
// The returned mapping is exactly [addr, addr+size).
func sysMap(size, align uintptr) (m mapping, err error) {
	over := size
	if align > pageSize {
		over = size + align - pageSize
		if over < size { // overflow
			return mapping{}, syscall.ENOMEM
		}
	}
	base, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, over,
		syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS, ^uintptr(0), 0)
	if errno != 0 {
		return mapping{}, errno
	}
	addr := (base + align - 1) &^ (align - 1)
	if head := addr - base; head > 0 {
		if err := sysMunmap(base, head); err != nil {
			_ = sysMunmap(base, over)
			return mapping{}, err
		}
	}
	if tail := base + over - (addr + size); tail > 0 {
		if err := sysMunmap(addr+size, tail); err != nil {
			_ = sysMunmap(addr, over-(addr-base))
			return mapping{}, err
		}
	}
	return mapping{addr: addr, size: size, base: addr, len: size}, nil
}

// sysUnmap releases a mapping made by sysMap.
func sysUnmap(m mapping) error { return sysMunmap(m.base, m.len) }

func sysMunmap(addr, size uintptr) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MUNMAP, addr, size, 0); errno != 0 {
		return errno
	}
	return nil
}

// sysHugePages asks the kernel to back [addr, addr+size) with transparent
// huge pages where it can. It is advice: failure is ignored.
func sysHugePages(addr, size uintptr) {
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, addr, size, syscall.MADV_HUGEPAGE)
}

// hostPointer turns a mapped address into the pointer a Block carries. The
// memory is outside the Go heap, so the conversion is safe.
func hostPointer(addr uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

const sysHasMmap = true
