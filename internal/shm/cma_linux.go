package shm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Single-copy transfers ("cross-memory attach", CMA): process_vm_readv and
// process_vm_writev copy between this process's memory and another's in
// one pass, the kernel pinning the other's pages, with no shared buffer in
// between. The kernel allows them only with ptrace access to the other
// process (PTRACE_MODE_ATTACH: the same user, not barred by Yama's
// ptrace_scope, the process dumpable), and some sandboxes filter the
// system calls out (seccomp). A failed copy says which it was: ErrFault,
// ErrNotPermitted, ErrNoProcess.

// Errors of ReadFrom and WriteTo; the system's error is wrapped too.
var (
	// ErrFault reports an address range that is not mapped (readable, or
	// writable for WriteTo) in the other process, or not in this one.
	ErrFault = errors.New("shm: single copy: address range not mapped")
	// ErrNotPermitted reports that the kernel refuses single copies to
	// or from that process (no ptrace access, Yama, seccomp, a kernel
	// without CONFIG_CROSS_MEMORY_ATTACH).
	ErrNotPermitted = errors.New("shm: single copy not permitted")
	// ErrNoProcess reports that the process does not exist (any more).
	ErrNoProcess = errors.New("shm: single copy: no such process")
)

// maxAddr bounds the addresses of another process that ReadFrom and
// WriteTo accept: user space ends below 2^57 on every 64-bit system Linux
// runs (five-level page tables); a range past it is ErrFault at once.
const maxAddr = 1 << 57

// ReadFrom copies len(dst) bytes from address addr of process pid into dst
// (process_vm_readv), in as many calls as the kernel takes. Only dst is
// written, whatever addr is: a range not mapped in pid returns an error
// matching ErrFault, never a fault of this process. On an error dst may
// hold part of the bytes.
func ReadFrom(pid int, dst []byte, addr uint64) error {
	return vmCopy(pid, dst, addr, false)
}

// WriteTo copies src to address addr of process pid (process_vm_writev),
// as ReadFrom reads.
func WriteTo(pid int, addr uint64, src []byte) error {
	return vmCopy(pid, src, addr, true)
}

// MaxVec is the most ranges one ReadVec call takes (the kernel's
// IOV_MAX).
const MaxVec = 1024

// ReadVec copies, for each i, len(dst[i]) bytes from address addrs[i] of
// process pid into dst[i], in as few process_vm_readv calls as the kernel
// takes: one for most lists. It takes at most MaxVec ranges. Only the dst
// slices are written, as for ReadFrom.
func ReadVec(pid int, dst [][]byte, addrs []uint64) error {
	return vecCopy(pid, dst, addrs, false)
}

// WriteVec copies, for each i, src[i] to address addrs[i] of process pid
// (process_vm_writev), as ReadVec reads.
func WriteVec(pid int, src [][]byte, addrs []uint64) error {
	return vecCopy(pid, src, addrs, true)
}

func vecCopy(pid int, dst [][]byte, addrs []uint64, write bool) error {
	if len(dst) != len(addrs) || len(dst) > MaxVec {
		return fmt.Errorf("shm: a vectored copy of %d buffers and %d addresses (at most %d)", len(dst), len(addrs), MaxVec)
	}
	if pid <= 0 {
		return fmt.Errorf("%w: pid %d", ErrNoProcess, pid)
	}
	liov := make([]unix.Iovec, 0, len(dst))
	riov := make([]unix.RemoteIovec, 0, len(dst))
	total := 0
	for i, b := range dst {
		if len(b) == 0 {
			continue
		}
		a := addrs[i]
		if a == 0 || a >= maxAddr || uint64(len(b)) > maxAddr-a {
			return fmt.Errorf("%w: [%#x, +%d) is outside user space", ErrFault, a, len(b))
		}
		l := unix.Iovec{Base: unsafe.SliceData(b)}
		l.SetLen(len(b))
		liov = append(liov, l)
		riov = append(riov, unix.RemoteIovec{Base: uintptr(a), Len: len(b)})
		total += len(b)
	}
	for len(liov) > 0 {
		var n int
		var err error
		if write {
			n, err = unix.ProcessVMWritev(pid, liov, riov, 0)
		} else {
			n, err = unix.ProcessVMReadv(pid, liov, riov, 0)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return vmErr(write, err)
		}
		if n <= 0 || n > total {
			return fmt.Errorf("%w: [%#x, +%d): copied %d bytes", ErrFault, riov[0].Base, riov[0].Len, n)
		}
		// A partial copy stops at the first page it cannot reach: go on
		// from there; the next call reports it.
		total -= n
		for n > 0 {
			k := min(n, riov[0].Len)
			n -= k
			if k == riov[0].Len {
				liov, riov = liov[1:], riov[1:]
				continue
			}
			liov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(liov[0].Base), k))
			liov[0].SetLen(int(liov[0].Len) - k)
			riov[0].Base += uintptr(k)
			riov[0].Len -= k
		}
	}
	return nil
}

func vmCopy(pid int, local []byte, addr uint64, write bool) error {
	if len(local) == 0 {
		return nil
	}
	if pid <= 0 {
		return fmt.Errorf("%w: pid %d", ErrNoProcess, pid)
	}
	if addr == 0 || addr >= maxAddr || uint64(len(local)) > maxAddr-addr {
		return fmt.Errorf("%w: [%#x, +%d) is outside user space", ErrFault, addr, len(local))
	}
	for len(local) > 0 {
		liov := [1]unix.Iovec{{Base: unsafe.SliceData(local)}}
		liov[0].SetLen(len(local))
		riov := [1]unix.RemoteIovec{{Base: uintptr(addr), Len: len(local)}}
		var n int
		var err error
		if write {
			n, err = unix.ProcessVMWritev(pid, liov[:], riov[:], 0)
		} else {
			n, err = unix.ProcessVMReadv(pid, liov[:], riov[:], 0)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return vmErr(write, err)
		}
		if n <= 0 || n > len(local) {
			// A partial copy stops at the first page it cannot reach:
			// the next call reports it; none at all is that page.
			return fmt.Errorf("%w: [%#x, +%d): copied %d bytes", ErrFault, addr, len(local), n)
		}
		local = local[n:]
		addr += uint64(n)
	}
	return nil
}

// vmErr classifies an error of process_vm_readv or process_vm_writev.
func vmErr(write bool, err error) error {
	op := "process_vm_readv"
	if write {
		op = "process_vm_writev"
	}
	switch err {
	case unix.EFAULT:
		return fmt.Errorf("%w (%s: %w)", ErrFault, op, err)
	case unix.EPERM, unix.EACCES, unix.ENOSYS:
		return fmt.Errorf("%w (%s: %w)", ErrNotPermitted, op, err)
	case unix.ESRCH:
		return fmt.Errorf("%w (%s: %w)", ErrNoProcess, op, err)
	}
	return fmt.Errorf("shm: %s: %w", op, err)
}

// SingleCopy reports whether single-copy transfers between two processes
// of this user on this machine can work, and describes how, or why not:
// the system call must work (it is tried on this process itself, which a
// seccomp filter or a kernel without it refuses), and Yama's ptrace_scope
// must not restrict ptrace access to descendants (1) or to processes
// with CAP_SYS_PTRACE (2) when this process lacks it, nor forbid it (3):
// the ranks of a job are siblings. A process can still refuse a peer for
// its own reasons (not dumpable): the link finds out at its first copy
// and falls back. The result is kept.
var SingleCopy = sync.OnceValues(singleCopy)

func singleCopy() (bool, string) {
	src := []byte("xpu single copy")
	dst := make([]byte, len(src))
	err := ReadFrom(os.Getpid(), dst, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(src)))))
	if err != nil {
		return false, err.Error()
	}
	if string(dst) != string(src) {
		return false, "process_vm_readv copied other bytes than asked"
	}
	if ok, why := yamaAllows(); !ok {
		return false, why
	}
	return true, "single copy by process_vm_readv"
}

// yamaAllows reads Yama's ptrace_scope (absent: no Yama).
func yamaAllows() (bool, string) {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return true, ""
	}
	scope, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return true, ""
	}
	switch {
	case scope <= 0:
		return true, ""
	case scope <= 2 && hasCapSysPtrace():
		return true, ""
	case scope == 1:
		return false, "Yama ptrace_scope=1 allows process_vm_readv only on descendants, not between ranks"
	case scope == 2:
		return false, "Yama ptrace_scope=2 allows process_vm_readv only with CAP_SYS_PTRACE"
	}
	return false, fmt.Sprintf("Yama ptrace_scope=%d forbids process_vm_readv", scope)
}

// hasCapSysPtrace reports whether CAP_SYS_PTRACE is in this process's
// effective set.
func hasCapSysPtrace() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_PTRACE) != 0
		}
	}
	return false
}
