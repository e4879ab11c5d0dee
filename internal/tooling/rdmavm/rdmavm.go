package rdmavm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/xpu-go/xpu/xerr"
)

// The guest's RDMA setup, which a job's script finds in its environment
// too (XPU_RDMAVM_ADDR, XPU_RDMAVM_DEVICE, XPU_RDMAVM_GID_INDEX).
const (
	// Device is the soft-RoCE device.
	Device = "rxe0"
	// Netdev is the dummy network device under Device.
	Netdev = "dummy0"
	// Addr is Netdev's IPv4 address (a /24), which rdma_cm binds to and
	// connects to: client and server run in the same guest.
	Addr = "192.0.2.1"
	// GIDIndex is the index of Device's RoCE v2 GID made of Addr
	// (::ffff:192.0.2.1); index 0 holds the link-local one.
	GIDIndex = 1
)

// Defaults of Job.
const (
	DefaultMemoryMiB   = 1024
	DefaultCPUs        = 2
	DefaultBootTimeout = 2 * time.Minute
)

// Environment variables the package reads.
const (
	// EnvCache names the cache directory of the image (see Prepare).
	EnvCache = "XPU_RDMAVM_CACHE"
	// EnvAccel picks qemu's accelerator: "tcg" (the default: emulation,
	// which runs anywhere) or "kvm" (a host with working KVM).
	EnvAccel = "XPU_RDMAVM_ACCEL"
	// EnvKernel pins the kernel, "6.1.0-NN-amd64", rather than the one
	// Debian's linux-image-amd64 depends on (which needs apt's lists).
	EnvKernel = "XPU_RDMAVM_KERNEL"
)

// place is the backend name of the package's *xerr.Error values.
const place = "rdmavm"

// Errors of the package.
var (
	// ErrUnavailable reports that the guest cannot run on this machine: a
	// tool is missing, or the kernel cannot be downloaded. It matches
	// xerr.ErrUnavailable.
	ErrUnavailable = xerr.NewKind("rdma guest unavailable", xerr.ErrUnavailable)
	// ErrGuestFailed reports that the guest did not run the job's script
	// to its end: qemu failed, the kernel did not come up, or the RDMA
	// setup failed. The error Run returns is a *GuestError that matches it.
	ErrGuestFailed = errors.New("guest failed")
	// ErrInvalidArgument reports a bad Job or setting; the value of
	// xerr's.
	ErrInvalidArgument = xerr.ErrInvalidArgument
)

// Job is what Run does in a guest.
type Job struct {
	// Files are host files to copy into the guest. A dynamic executable
	// comes with the shared libraries ldd lists for it, each at its host
	// path.
	Files []File
	// Script is run by busybox sh in /root once the RDMA setup is done,
	// with stdin from /dev/null and stdout and stderr to Output; its exit
	// status is Result.ExitCode. The guest's tools are busybox's, ip and
	// rdma, and the references under /usr/bin: ibv_devinfo,
	// ibv_rc_pingpong, rping, ib_send_lat, ib_send_bw, ib_write_lat,
	// ib_write_bw and ib_read_bw.
	Script string
	// Env holds "NAME=value" variables exported to Script.
	Env []string
	// Output receives Script's output as the guest writes it. Run writes
	// to it from another goroutine, never after it returns; nil discards
	// the output. An error from Output makes Run fail once the guest is
	// done (the rest of the output is discarded, not left to block the
	// guest).
	Output io.Writer
	// MemoryMiB and CPUs size the guest; 0 means DefaultMemoryMiB and
	// DefaultCPUs.
	MemoryMiB int
	CPUs      int
	// BootTimeout bounds the boot, from starting qemu to the end of the
	// RDMA setup; 0 means DefaultBootTimeout. Run's ctx bounds the whole.
	BootTimeout time.Duration
}

// File is a host file copied into the guest.
type File struct {
	// Host is the file's path on the host.
	Host string
	// Guest is its absolute path in the guest; empty means
	// /usr/local/bin/ and Host's base name, which is on the script's PATH.
	// A path under /bin, /sbin, /lib or /lib64 lands under /usr, which
	// they link to; one under /proc, /sys, /dev or /tmp, which the guest
	// mounts over, is refused.
	Guest string
}

// Result is what a job did.
type Result struct {
	// ExitCode is the exit status of the job's script.
	ExitCode int
	// Boot is the time from starting qemu to the end of the RDMA setup:
	// firmware, kernel, modules, soft-RoCE.
	Boot time.Duration
	// Run is the time the script ran.
	Run time.Duration
}

// GuestError reports a guest that did not run the job's script to its
// end. It matches ErrGuestFailed.
type GuestError struct {
	// Reason says what happened, on one line.
	Reason string
	// Console is the end of the guest's serial console: kernel messages
	// and those of its init.
	Console string
	// Stderr is the end of qemu's standard error.
	Stderr string
}

func (e *GuestError) Error() string {
	s := place + ": " + e.Reason
	if c := lastLines(e.Stderr, 2); c != "" {
		s += "; qemu: " + c
	}
	if c := consoleSummary(e.Console); c != "" {
		s += "; console: " + c
	}
	return s + ": " + ErrGuestFailed.Error()
}

// Is reports whether target is ErrGuestFailed.
func (e *GuestError) Is(target error) bool { return target == ErrGuestFailed }

// Available returns nil when Run can work here, else why not, matching
// ErrUnavailable: a missing tool (with its package), a host that is not
// linux/amd64, or KVM asked for and not usable. It downloads nothing: the
// kernel can still be missing, which Run reports.
func Available() error {
	if _, err := findHost(); err != nil {
		return err
	}
	_, err := accelArgs()
	return err
}

// accelArgs returns qemu's accelerator and CPU options for EnvAccel.
func accelArgs() ([]string, error) {
	switch a := os.Getenv(EnvAccel); a {
	case "", "tcg":
		return []string{"-accel", "tcg", "-cpu", "max"}, nil
	case "kvm":
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return nil, unavailable("%s=kvm: %v", EnvAccel, err)
		}
		f.Close()
		return []string{"-accel", "kvm", "-cpu", "host"}, nil
	default:
		return nil, xerr.Errorf(place, "", ErrInvalidArgument, "%s=%q: want tcg or kvm", EnvAccel, a)
	}
}

// powerOffGrace is how long Run waits for the guest to power off once
// the script's exit status is in, before it kills qemu.
const powerOffGrace = 10 * time.Second

// Run boots a guest, runs job in it and returns the script's exit status
// with the boot and run times; a script that fails is not an error of
// Run. The image is built first when the cache lacks it (see Prepare).
//
// Errors: one matching ErrUnavailable when the guest cannot run here, a
// *GuestError (ErrGuestFailed) when it does not get through the job,
// ErrInvalidArgument for a bad job, and one matching ctx.Err() when ctx
// ends first. Every wait is bounded by ctx: when it ends, qemu is killed.
// Run returns only once qemu has been reaped and its temporary files
// removed; qemu also dies with the process that runs Run, however that
// process dies.
func Run(ctx context.Context, job Job) (Result, error) {
	if err := job.check(); err != nil {
		return Result{}, err
	}
	accel, err := accelArgs()
	if err != nil {
		return Result{}, err
	}
	img, err := prepare(ctx)
	if err != nil {
		return Result{}, err
	}
	qemu, ok := lookTool(qemuCommand)
	if !ok {
		return Result{}, unavailable("no %s", qemuCommand)
	}
	dir, err := os.MkdirTemp("", "xpu-rdmavm-")
	if err != nil {
		return Result{}, xerrorf("run", ErrUnavailable, "%v", err)
	}
	defer os.RemoveAll(dir)

	initrd := filepath.Join(dir, "initrd")
	if err := writeJobInitrd(ctx, img.initrd, initrd, job); err != nil {
		if ctx.Err() != nil {
			return Result{}, xerrorf("run", ctx.Err(), "writing the initramfs")
		}
		return Result{}, fmt.Errorf("%s run: %w", place, err)
	}
	sock := filepath.Join(dir, "status")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return Result{}, fmt.Errorf("%s run: %w", place, err)
	}
	defer ln.Close()
	console := filepath.Join(dir, "console")

	args := append(accel,
		"-M", "pc", "-smp", strconv.Itoa(job.CPUs), "-m", strconv.Itoa(job.MemoryMiB),
		"-nodefaults", "-no-user-config", "-no-reboot", "-display", "none",
		"-serial", "file:"+qemuEscape(console),
		"-kernel", img.kernel, "-initrd", initrd,
		"-append", "console=ttyS0 quiet panic=-1 mitigations=off clocksource=tsc tsc=reliable",
		"-device", "virtio-serial-pci,id=vs",
		"-chardev", "stdio,id=out,signal=off",
		"-device", "virtserialport,bus=vs.0,nr=1,chardev=out,name=xpu.out",
		"-chardev", "socket,id=status,path="+qemuEscape(sock),
		"-device", "virtserialport,bus=vs.0,nr=2,chardev=status,name=xpu.status",
	)
	if _, err := os.Stat(qbootROM); err == nil && img.elf {
		args = append(args, "-bios", qbootROM)
	}
	// qemu's stdin is a pipe kept open until it exits: at end-of-file the
	// stdio chardev reports its host side closed, and the guest's writes
	// to the output port then block.
	stdin, keep, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("%s run: %w", place, err)
	}
	defer keep.Close()
	cmd := exec.CommandContext(ctx, qemu, args...)
	out := &outWriter{w: job.Output}
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, stderr
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	waitc, err := startTied(cmd)
	stdin.Close()
	if err != nil {
		return Result{}, unavailable("cannot start %s: %v", qemu, err)
	}
	events := make(chan event, 8)
	go readStatus(ln, events)

	var (
		st      = status{code: -1}
		waitErr error
		killed  string // why Run killed qemu
		done    = ctx.Done()
		grace   <-chan time.Time
	)
	boot := time.NewTimer(job.BootTimeout)
	defer boot.Stop()
wait:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			st.note(ev)
			if !st.ready.IsZero() {
				boot.Stop()
			}
			if st.code >= 0 && grace == nil {
				grace = time.After(powerOffGrace)
			}
		case waitErr = <-waitc:
			break wait
		case <-boot.C:
			if st.ready.IsZero() {
				killed = fmt.Sprintf("the guest did not set up RDMA within %v", job.BootTimeout)
				cmd.Process.Kill()
			}
		case <-grace:
			cmd.Process.Kill() // the guest did not power off; its job is done
		case <-done:
			done = nil // CommandContext kills qemu
		}
	}
	// qemu is gone: its end of the status socket is closed, so the reader
	// drains what is left and closes events.
	ln.Close()
	if events != nil {
		for ev := range events {
			st.note(ev)
		}
	}

	if st.code >= 0 {
		if out.err != nil {
			return Result{}, fmt.Errorf("%s run: writing the output: %w", place, out.err)
		}
		return Result{ExitCode: st.code, Boot: st.ready.Sub(start), Run: st.exited.Sub(st.ready)}, nil
	}
	if ctx.Err() != nil {
		return Result{}, xerrorf("run", ctx.Err(), "guest stopped after %v", time.Since(start).Round(time.Millisecond))
	}
	ge := &GuestError{Console: tailFile(console, 8<<10), Stderr: stderr.String()}
	switch {
	case st.failure != "":
		ge.Reason = "guest setup failed: " + st.failure
	case killed != "":
		ge.Reason = killed
	case st.ready.IsZero():
		ge.Reason = fmt.Sprintf("the guest stopped before its RDMA setup ended (qemu: %v)", exitText(waitErr))
	default:
		ge.Reason = fmt.Sprintf("the guest stopped while the script ran (qemu: %v)", exitText(waitErr))
	}
	return Result{}, ge
}

// check validates job and fills in its defaults.
func (job *Job) check() error {
	bad := func(format string, args ...any) error {
		return xerr.Errorf(place, "", ErrInvalidArgument, format, args...)
	}
	if job.MemoryMiB == 0 {
		job.MemoryMiB = DefaultMemoryMiB
	}
	if job.CPUs == 0 {
		job.CPUs = DefaultCPUs
	}
	if job.BootTimeout == 0 {
		job.BootTimeout = DefaultBootTimeout
	}
	if job.MemoryMiB < 256 || job.CPUs < 1 || job.BootTimeout < 0 {
		return bad("memory %d MiB, %d CPUs, boot timeout %v: want at least 256 MiB, 1 CPU and a positive timeout",
			job.MemoryMiB, job.CPUs, job.BootTimeout)
	}
	files := make([]File, len(job.Files))
	for i, f := range job.Files {
		if f.Guest == "" {
			f.Guest = "/usr/local/bin/" + filepath.Base(f.Host)
		}
		if !path.IsAbs(f.Guest) {
			return bad("guest path %q is not absolute", f.Guest)
		}
		f.Guest = guestPath(f.Guest)
		if f.Guest == "/init" || under(f.Guest, "/xpu") {
			return bad("guest path %q is the harness's", f.Guest)
		}
		for _, m := range []string{"/proc", "/sys", "/dev", "/tmp"} {
			if under(f.Guest, m) {
				return bad("guest path %q is hidden by the guest's mount on %s", f.Guest, m)
			}
		}
		st, err := os.Stat(f.Host)
		if err != nil {
			return bad("%v", err)
		}
		if !st.Mode().IsRegular() {
			return bad("%s is not a regular file", f.Host)
		}
		files[i] = f
	}
	job.Files = files
	for _, kv := range job.Env {
		if name, _, ok := strings.Cut(kv, "="); !ok || !envName.MatchString(name) {
			return bad("environment entry %q is not NAME=value", kv)
		}
	}
	return nil
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// writeJobInitrd writes the guest's initramfs to dst: the base image, then
// a second archive, which the kernel unpacks over the first, with the
// job's files, their libraries, its script (/xpu/job.sh) and environment
// (/xpu/env).
func writeJobInitrd(ctx context.Context, base, dst string, job Job) error {
	in, err := os.Open(base)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, in); err != nil {
		return err
	}
	a := newArchive(f)
	if len(job.Files) > 0 {
		ldd, ok := lookTool("ldd")
		if !ok {
			return unavailable("no ldd (libc-bin)")
		}
		for _, file := range job.Files {
			a.hostFile(file.Guest, file.Host)
		}
		for _, file := range job.Files {
			libs, err := libraries(ctx, ldd, file.Host)
			if err != nil {
				return err
			}
			for _, l := range libs {
				a.hostFile(guestPath(l), l)
			}
		}
	}
	var env strings.Builder
	for _, kv := range job.Env {
		name, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&env, "export %s='%s'\n", name, strings.ReplaceAll(value, "'", `'\''`))
	}
	a.text("/xpu/env", 0o644, env.String())
	a.text("/xpu/job.sh", 0o644, job.Script)
	if err := a.close(); err != nil {
		return err
	}
	return f.Close()
}

// qemuEscape escapes the commas of a value in a qemu option list.
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// event is a line of the status port and when it came.
type event struct {
	line string
	at   time.Time
}

// readStatus sends the lines of the first connection to ln, qemu's status
// port, on events, and closes events when the connection or ln closes.
func readStatus(ln *net.UnixListener, events chan<- event) {
	defer close(events)
	conn, err := ln.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		events <- event{line: strings.TrimSpace(sc.Text()), at: time.Now()}
	}
}

// status is what the guest's init reported.
type status struct {
	ready   time.Time // the RDMA setup was done
	exited  time.Time // the script ended
	code    int       // its exit status, -1 before
	failure string    // init's reason for giving up
}

func (s *status) note(ev event) {
	switch {
	case ev.line == "ready":
		s.ready = ev.at
	case strings.HasPrefix(ev.line, "exit "):
		if c, err := strconv.Atoi(strings.TrimPrefix(ev.line, "exit ")); err == nil {
			s.code, s.exited = c, ev.at
		}
	case strings.HasPrefix(ev.line, "fail "):
		s.failure = strings.TrimPrefix(ev.line, "fail ")
	}
}

// outWriter passes the guest's output to w, and keeps draining (and
// dropping) it after w fails, so that the guest never blocks on it.
type outWriter struct {
	w   io.Writer
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	if o.w != nil && o.err == nil {
		if _, err := o.w.Write(p); err != nil {
			o.err = err
		}
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// tailFile returns the last max bytes of the file at p, or "".
func tailFile(p string, max int64) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// consoleSummary returns the line of the console that says most about a
// failure: the last one of init's own messages or of a kernel panic,
// oops or out-of-memory kill, else the last two lines; kernel timestamps
// are dropped.
func consoleSummary(console string) string {
	lines := strings.Split(strings.ReplaceAll(console, "\r", ""), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(kernelStamp.ReplaceAllString(l, ""))
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if telling.MatchString(lines[i]) {
			return lines[i]
		}
	}
	return lastLines(strings.Join(lines, "\n"), 2)
}

var (
	kernelStamp = regexp.MustCompile(`^\s*\[\s*\d+\.\d+\]\s*`)
	telling     = regexp.MustCompile(`^rdmavm init:|Kernel panic|Oops|BUG:|Out of memory|Killed process|Unable to|not syncing`)
)

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func unavailable(format string, args ...any) error {
	return xerr.Errorf(place, "", ErrUnavailable, format, args...)
}

func xerrorf(op string, sentinel error, format string, args ...any) error {
	return xerr.Errorf(place, op, sentinel, format, args...)
}
