package shm

import (
	"crypto/rand"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewRegion makes a region of size bytes (zeroed).
func NewRegion(size int) (*Region, error) {
	if size <= 0 || size > MaxRegion {
		return nil, fmt.Errorf("shm: region of %d bytes outside [1, %d]", size, MaxRegion)
	}
	fd, mem, err := makeMem(regionHeader + size)
	if err != nil {
		return nil, err
	}
	r := &Region{mem: mem, fd: fd}
	if _, err := rand.Read(r.nonce[:]); err != nil {
		r.Close()
		return nil, fmt.Errorf("shm: nonce: %w", err)
	}
	writeRegionHeader(mem, size, r.nonce)
	return r, nil
}

// Offer returns what another process needs to attach r.
func (r *Region) Offer() RegionOffer {
	return RegionOffer{PID: os.Getpid(), FD: r.fd, Size: len(r.mem) - regionHeader, Nonce: r.nonce}
}

// AttachRegion maps the region o describes; it fails as Attach does.
func AttachRegion(o RegionOffer) (*Region, error) {
	if o.Size <= 0 || o.Size > MaxRegion || o.PID <= 0 || o.FD < 0 {
		return nil, fmt.Errorf("shm: no region of %d bytes at pid %d fd %d", o.Size, o.PID, o.FD)
	}
	mem, err := openMem(o.PID, o.FD, regionHeader+o.Size)
	if err != nil {
		return nil, err
	}
	if err := checkRegionHeader(mem, o.Size, o.Nonce); err != nil {
		_ = unix.Munmap(mem)
		return nil, err
	}
	return &Region{mem: mem, fd: -1, nonce: o.Nonce}, nil
}

// Attached closes the creator's descriptor once every process that needs
// the region has mapped it.
func (r *Region) Attached() {
	if r.fd >= 0 {
		_ = unix.Close(r.fd)
		r.fd = -1
	}
}

// Close unmaps the region.
func (r *Region) Close() {
	r.Attached()
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
	}
}

// Futex operations (linux/futex.h), without FUTEX_PRIVATE_FLAG: the word
// is shared between processes.
const (
	futexWait = 0
	futexWake = 1
)

// Wait sleeps while *w == val, at most d, unless woken earlier by Wake (a
// futex shared between processes). Spurious returns are possible: the
// caller checks again.
func Wait(w *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// Wake wakes every process sleeping in Wait on w.
func Wake(w *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWake, uintptr(1<<30), 0, 0, 0)
}
