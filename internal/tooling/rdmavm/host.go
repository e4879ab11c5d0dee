package rdmavm

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// tool is a program or file of the host the harness needs, and the Debian
// package that provides it.
type tool struct {
	name string // a command found through PATH (and the sbin directories), or an absolute path or glob
	pkg  string
}

// buildTools run on the host to build the image; qemu runs it.
var buildTools = []tool{
	{"apt-get", "apt"},
	{"apt-cache", "apt"},
	{"dpkg-deb", "dpkg"},
	{"depmod", "kmod"},
	{"modprobe", "kmod"},
	{"xz", "xz-utils"},
	{"ldd", "libc-bin"},
	{qemuCommand, "qemu-system-x86"},
}

// guestTools are the host programs copied into the guest, each at its
// host path, with their shared libraries: the RDMA setup (busybox, ip,
// rdma) and the references a test compares with (perftest, ibverbs-utils,
// rdmacm-utils).
var guestTools = []tool{
	{"busybox", "busybox-static"},
	{"ip", "iproute2"},
	{"rdma", "iproute2"},
	{"ibv_devinfo", "ibverbs-utils"},
	{"ibv_rc_pingpong", "ibverbs-utils"},
	{"rping", "rdmacm-utils"},
	{"ib_send_lat", "perftest"},
	{"ib_send_bw", "perftest"},
	{"ib_write_lat", "perftest"},
	{"ib_write_bw", "perftest"},
	{"ib_read_bw", "perftest"},
}

// The soft-RoCE provider of rdma-core's libibverbs, which libibverbs
// loads by the path it was built with, and the file that names it.
var (
	providerGlob = "/usr/lib/*-linux-gnu/libibverbs/librxe-rdmav*.so"
	providerConf = tool{"/etc/libibverbs.d/rxe.driver", "ibverbs-providers"}
)

const qemuCommand = "qemu-system-x86_64"

// qbootROM is qboot, a firmware that boots an ELF kernel by its PVH entry
// far faster than SeaBIOS under emulation (package qemu-system-data). It
// is used when present.
const qbootROM = "/usr/share/qemu/qboot.rom"

// host holds what was found of the host: the paths of the build tools and
// of the files copied into the guest.
type host struct {
	tools    map[string]string // name → path
	guest    []string          // host paths of guestTools, in order
	provider string
	conf     string
}

// findHost finds every tool and file; the error lists all that are
// missing, with the package that provides each, and matches
// ErrUnavailable.
func findHost() (*host, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return nil, unavailable("the guest runs host binaries of linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	h := &host{tools: map[string]string{}}
	var missing []string
	miss := func(t tool) { missing = append(missing, fmt.Sprintf("%s (%s)", t.name, t.pkg)) }
	for _, t := range buildTools {
		if p, ok := lookTool(t.name); ok {
			h.tools[t.name] = p
		} else {
			miss(t)
		}
	}
	for _, t := range guestTools {
		p, ok := lookTool(t.name)
		switch {
		case !ok:
			miss(t)
		case t.name == "busybox" && !isStatic(p):
			missing = append(missing, fmt.Sprintf("a static busybox, not %s (%s)", p, t.pkg))
		default:
			h.guest = append(h.guest, p)
		}
	}
	if m, _ := filepath.Glob(providerGlob); len(m) > 0 {
		h.provider = m[0]
	} else {
		miss(tool{"librxe-rdmav*.so", "ibverbs-providers"})
	}
	if _, err := os.Stat(providerConf.name); err == nil {
		h.conf = providerConf.name
	} else {
		miss(providerConf)
	}
	if len(missing) > 0 {
		return nil, unavailable("missing %s (scripts/setup.sh installs them)", strings.Join(missing, ", "))
	}
	return h, nil
}

// lookTool finds a command through PATH, then in the sbin directories a
// user's PATH often lacks.
func lookTool(name string) (string, bool) {
	if filepath.IsAbs(name) {
		_, err := os.Stat(name)
		return name, err == nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// isStatic reports whether the ELF file at p has no program interpreter.
func isStatic(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// guestPath maps a host path to where the guest keeps it. The guest's
// root has the merged /usr layout (/bin, /sbin, /lib and /lib64 are links
// into /usr), so every file is written under /usr, whatever the host's
// layout: a cpio archive cannot write through a link.
func guestPath(p string) string {
	p = path.Clean(p)
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return "/usr" + p
		}
	}
	return p
}

// usrLinks are the links of the merged /usr layout.
var usrLinks = [][2]string{{"/bin", "usr/bin"}, {"/sbin", "usr/sbin"}, {"/lib", "usr/lib"}, {"/lib64", "usr/lib64"}}

// libraries returns the host paths of the shared libraries that bin loads,
// its dynamic loader included, as ldd lists them; none for a static
// binary or a file that is not a dynamic executable.
func libraries(ctx context.Context, ldd, bin string) ([]string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, ldd, bin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if strings.Contains(stdout.String()+stderr.String(), "not a dynamic executable") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, firstLine(stderr.String()))
	}
	var libs []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		// "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)",
		// "\t/lib64/ld-linux-x86-64.so.2 (0x…)", "\tlinux-vdso.so.1 (0x…)".
		line := strings.TrimSpace(sc.Text())
		name, target, arrow := strings.Cut(line, " => ")
		if arrow {
			if strings.HasPrefix(target, "not found") {
				return nil, fmt.Errorf("ldd %s: %s not found", bin, name)
			}
			line = target
		}
		p, _, _ := strings.Cut(line, " (")
		if strings.HasPrefix(p, "/") {
			libs = append(libs, p)
		}
	}
	return libs, nil
}

// closure returns bins and the libraries they load, each once, in order.
func closure(ctx context.Context, ldd string, bins ...string) ([]string, error) {
	seen := map[string]bool{}
	var all []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			all = append(all, p)
		}
	}
	for _, b := range bins {
		add(b)
		libs, err := libraries(ctx, ldd, b)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			add(l)
		}
	}
	return all, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// lastLines returns the last n non-empty lines of s joined by " | ", for a
// one-line error.
func lastLines(s string, n int) string {
	var out []string
	lines := strings.Split(strings.ReplaceAll(s, "\r", ""), "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append(out, l)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return strings.Join(out, " | ")
}

// runTool runs a build command and returns its stdout; the error carries
// the last lines of its stderr.
func runTool(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(name), ctx.Err())
		}
		msg := lastLines(stderr.String(), 2)
		if msg == "" {
			msg = lastLines(stdout.String(), 2)
		}
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}
