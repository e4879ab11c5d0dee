package bench

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// NewSpinRing makes a SpinRing on side 0's end: an anonymous memory file,
// mapped, whose offer the peer maps with AttachSpinRing. The file's
// descriptor stays open until Attached (or Close), so that the peer can
// open it through /proc.
func NewSpinRing() (*SpinRing, SpinOffer, error) {
	fd, err := unix.MemfdCreate("xpu-spinring", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, SpinOffer{}, fmt.Errorf("bench: spin ring: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, spinRingSize); err != nil {
		_ = unix.Close(fd)
		return nil, SpinOffer{}, fmt.Errorf("bench: spin ring: size: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, spinRingSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		return nil, SpinOffer{}, fmt.Errorf("bench: spin ring: map: %w", err)
	}
	s := newSpinRing(mem, nil)
	s.fd = fd
	s.close = func() error {
		s.Attached()
		return unix.Munmap(mem)
	}
	return s, SpinOffer{PID: os.Getpid(), FD: fd}, nil
}

// AttachSpinRing maps the SpinRing of o, on side 1's end.
func AttachSpinRing(o SpinOffer) (*SpinRing, error) {
	path := "/proc/" + strconv.Itoa(o.PID) + "/fd/" + strconv.Itoa(o.FD)
	f, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bench: spin ring: open %s: %w", path, err)
	}
	defer unix.Close(f)
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		return nil, fmt.Errorf("bench: spin ring: stat %s: %w", path, err)
	}
	if st.Size != spinRingSize {
		return nil, fmt.Errorf("bench: spin ring: %s holds %d bytes, want %d", path, st.Size, spinRingSize)
	}
	mem, err := unix.Mmap(f, 0, spinRingSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("bench: spin ring: map %s: %w", path, err)
	}
	return newSpinRing(mem, func() error { return unix.Munmap(mem) }), nil
}

// Attached closes side 0's descriptor once the peer has mapped the ring:
// the memory then lives only as long as the two mappings. A no-op on
// side 1's end, and after the first call.
func (s *SpinRing) Attached() {
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
}
