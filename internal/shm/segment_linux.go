package shm

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Create makes a segment whose rings hold ringSize bytes each (a power of
// two in [MinRing, MaxRing]).
func Create(ringSize int) (*Segment, error) {
	if err := checkRingSize(ringSize); err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	fd, mem, err := makeMem(segmentSize(ringSize))
	if err != nil {
		return nil, err
	}
	s := &Segment{size: ringSize, creator: true, fd: fd, mem: mem}
	if _, err := rand.Read(s.nonce[:]); err != nil {
		s.Close()
		return nil, fmt.Errorf("shm: nonce: %w", err)
	}
	writeHeader(mem, ringSize, s.nonce)
	return s, nil
}

// makeMem makes an anonymous memory file of size bytes, sealed against
// resizing, and maps it.
func makeMem(size int) (int, []byte, error) {
	fd, err := unix.MemfdCreate("xpu-shm", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: size the segment: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		_ = unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: seal the segment: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: map the segment: %w", err)
	}
	return fd, mem, nil
}

// Offer returns what the peer needs to attach.
func (s *Segment) Offer() Offer {
	return Offer{PID: os.Getpid(), FD: s.fd, RingSize: s.size, Nonce: s.nonce}
}

// Attach maps the segment o describes: the memory file open as descriptor
// o.FD in process o.PID, sealed against shrinking, of the size o.RingSize
// implies, with o.Nonce in its header. It fails when the file cannot be
// opened (another machine, another PID namespace, another user, a process
// that has gone) or is not that segment.
func Attach(o Offer) (*Segment, error) {
	if err := checkRingSize(o.RingSize); err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	if o.PID <= 0 || o.FD < 0 {
		return nil, fmt.Errorf("shm: no segment at pid %d fd %d", o.PID, o.FD)
	}
	mem, err := openMem(o.PID, o.FD, segmentSize(o.RingSize))
	if err != nil {
		return nil, err
	}
	if _, err := checkHeader(mem, o.Nonce); err != nil {
		_ = unix.Munmap(mem)
		return nil, err
	}
	return &Segment{mem: mem, size: o.RingSize, fd: -1, nonce: o.Nonce}, nil
}

// openMem maps the memory file open as descriptor fd in process pid,
// which must be sealed against resizing and hold size bytes.
func openMem(pid, fd, size int) ([]byte, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(fd)
	f, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: open %s: %w", path, err)
	}
	defer unix.Close(f)
	seals, err := unix.FcntlInt(uintptr(f), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: %s is not a memory file: %w", path, err)
	}
	if seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		return nil, fmt.Errorf("shm: %s is not sealed against resizing", path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		return nil, fmt.Errorf("shm: stat %s: %w", path, err)
	}
	if st.Size != int64(size) {
		return nil, fmt.Errorf("shm: %s holds %d bytes, want %d", path, st.Size, size)
	}
	mem, err := unix.Mmap(f, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: map %s: %w", path, err)
	}
	return mem, nil
}

// Attached tells the creator that the peer has mapped the segment: its
// descriptor is closed, so that the segment lives only as long as the
// mappings. A no-op on the attacher's side.
func (s *Segment) Attached() { s.closeFD() }

func (s *Segment) closeFD() {
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
}

// Close unmaps the segment (and closes the creator's descriptor if it is
// still open). Nothing may touch the segment afterwards: a Conn over it
// unmaps it with Conn.Unmap, or once the Conn is unreachable.
func (s *Segment) Close() {
	s.closeFD()
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem = nil
	}
}
