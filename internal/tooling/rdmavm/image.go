package rdmavm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// imageVersion names the layout of a cached image. Change it when the
// image changes in a way the key does not already see (the key hashes the
// init script and the host files copied in).
const imageVersion = 1

// metaPackage is the Debian package whose dependency names the kernel:
// linux-image-VERSION, whose modules include rdma_rxe (the -cloud flavour's
// do not).
const metaPackage = "linux-image-amd64"

// Module roots of the guest, loaded with their dependencies in the order
// modprobe gives. The virtio ones come first, so that init can report a
// failure of the rest over the status port. crc32_generic is loaded by
// hand: rdma_rxe asks the crypto API for "crc32", which would load it
// through modprobe, and the guest has none.
var (
	virtioModules = []string{"virtio_pci", "virtio_console"}
	rdmaModules   = []string{"crc32_generic", "dummy", "rdma_rxe", "rdma_ucm"}
)

// Names of the files of a cache entry.
const (
	kernelFile = "kernel"      // an ELF vmlinux, or the vmlinuz it could not be taken from
	initrdFile = "initrd.cpio" // the base initramfs
)

// image is a built image in the cache.
type image struct {
	kernel string // path of the kernel file
	initrd string // path of the base initramfs
	elf    bool   // the kernel is an ELF vmlinux, which qemu boots by its PVH entry
}

// prep serialises Prepare in this process (a one-slot semaphore, so that
// a waiter honours its ctx) and remembers the cache entry it found; a
// lock file does the same between processes.
var prep = struct {
	sem     chan struct{}
	dir     string // the entry found last
	updated bool   // apt-get update has run
}{sem: make(chan struct{}, 1)}

// Prepare builds the guest image into the cache unless it is there
// already, and returns the reason it cannot when it cannot: an error
// matching ErrUnavailable when a tool is missing or the kernel package
// cannot be downloaded. Run calls it; a test calls it first to keep the
// build, which downloads about 70 MB once, out of a boot's time.
//
// The cache is EnvCache's directory, else xpu/rdmavm in
// os.UserCacheDir(); an entry is keyed by the kernel version and a hash of
// the harness's image layout and of the host files copied in. Processes
// that prepare the same cache at once build it once: a lock file
// serialises them.
func Prepare(ctx context.Context) error {
	_, err := prepare(ctx)
	return err
}

func prepare(ctx context.Context) (*image, error) {
	select {
	case prep.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, xerrorf("prepare", ctx.Err(), "waiting for another build")
	}
	defer func() { <-prep.sem }()
	if prep.dir != "" {
		if img, ok := openImage(prep.dir); ok {
			return img, nil
		}
	}
	h, err := findHost()
	if err != nil {
		return nil, err
	}
	kver, err := kernelVersion(ctx, h)
	if err != nil {
		return nil, err
	}
	root, err := cacheRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, kver+"-"+h.fingerprint())
	img, ok := openImage(dir)
	if !ok {
		unlock, err := lockFile(ctx, filepath.Join(root, "lock"))
		if err != nil {
			return nil, xerrorf("prepare", err, "cannot lock the cache %s", root)
		}
		defer unlock()
		if img, ok = openImage(dir); !ok {
			if err := build(ctx, h, kver, root, dir); err != nil {
				return nil, err
			}
			if img, ok = openImage(dir); !ok {
				return nil, fmt.Errorf("rdmavm prepare: %s is incomplete", dir)
			}
		}
	}
	prep.dir = dir
	return img, nil
}

// openImage returns the image of cache entry dir, and false when its
// files are not there.
func openImage(dir string) (*image, bool) {
	img := &image{kernel: filepath.Join(dir, kernelFile), initrd: filepath.Join(dir, initrdFile)}
	if st, err := os.Stat(img.initrd); err != nil || !st.Mode().IsRegular() {
		return nil, false
	}
	f, err := os.Open(img.kernel)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return nil, false
	}
	img.elf = string(magic[:]) == elf4
	return img, true
}

const elf4 = "\x7fELF"

func cacheRoot() (string, error) {
	root := os.Getenv(EnvCache)
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", unavailable("no cache directory (set %s): %v", EnvCache, err)
		}
		root = filepath.Join(c, "xpu", "rdmavm")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", unavailable("cannot make the cache directory: %v", err)
	}
	return root, nil
}

// fingerprint hashes what the image holds besides the kernel: the
// layout's version, the init script, and the host files copied in (path,
// size, modification time), so that an upgraded rdma-core or perftest
// gives a new image.
func (h *host) fingerprint() string {
	s := sha256.New()
	fmt.Fprintf(s, "v%d\n%s\n%q %q\n", imageVersion, initTemplate, virtioModules, rdmaModules)
	for _, p := range append(append([]string{}, h.guest...), h.provider, h.conf) {
		if st, err := os.Stat(p); err == nil {
			fmt.Fprintf(s, "%s %d %d\n", p, st.Size(), st.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(s.Sum(nil))[:12]
}

// kernelVersion returns EnvKernel's version, else the version of the
// kernel metaPackage depends on, running apt-get update once when apt
// does not know it.
func kernelVersion(ctx context.Context, h *host) (string, error) {
	if v := os.Getenv(EnvKernel); v != "" {
		return strings.TrimPrefix(v, "linux-image-"), nil
	}
	for {
		out, err := runTool(ctx, "", h.tools["apt-cache"], "depends", metaPackage)
		if err == nil {
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Depends: linux-image-"); ok && v != "" {
					return v, nil
				}
			}
			err = fmt.Errorf("apt-cache depends %s names no linux-image package", metaPackage)
		}
		if ctx.Err() != nil {
			return "", xerrorf("prepare", ctx.Err(), "finding the kernel package")
		}
		if prep.updated {
			return "", unavailable("cannot find the kernel of %s (or set %s): %v", metaPackage, EnvKernel, err)
		}
		if err := aptUpdate(ctx, h); err != nil {
			return "", err
		}
	}
}

func aptUpdate(ctx context.Context, h *host) error {
	prep.updated = true
	if _, err := runTool(ctx, "", h.tools["apt-get"], "update", "-qq"); err != nil {
		if ctx.Err() != nil {
			return xerrorf("prepare", ctx.Err(), "apt-get update")
		}
		return unavailable("%v", err)
	}
	return nil
}

// module is a kernel module of the image: where the unpacked package has
// it, and its parameters.
type module struct {
	path   string
	params string
}

// build makes the image of kernel kver into dir, through a work directory
// in root that it renames to dir when done, so that dir is complete or
// absent.
func build(ctx context.Context, h *host, kver, root, dir string) (err error) {
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = xerrorf("prepare", ctx.Err(), "building the image")
		}
	}()
	work, err := os.MkdirTemp(root, ".build-")
	if err != nil {
		return fmt.Errorf("rdmavm prepare: %w", err)
	}
	defer os.RemoveAll(work)
	deb, err := download(ctx, h, "linux-image-"+kver, work)
	if err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("rdmavm prepare: kernel %s: %w", kver, err) }
	tree := filepath.Join(work, "root")
	if _, err := runTool(ctx, "", h.tools["dpkg-deb"], "-x", deb, tree); err != nil {
		return fail(err)
	}
	os.Remove(deb)
	if _, err := runTool(ctx, "", h.tools["depmod"], "-b", tree, kver); err != nil {
		return fail(err)
	}
	virtio, err := showDepends(ctx, h, tree, kver, virtioModules, nil)
	if err != nil {
		return fail(err)
	}
	rdma, err := showDepends(ctx, h, tree, kver, rdmaModules, virtio)
	if err != nil {
		return fail(err)
	}
	out := filepath.Join(work, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return fail(err)
	}
	vmlinuz := filepath.Join(tree, "boot", "vmlinuz-"+kver)
	if err := extractKernel(ctx, h.tools["xz"], vmlinuz, filepath.Join(out, kernelFile)); err != nil {
		return fail(err)
	}
	if err := writeBase(ctx, h, tree, kver, virtio, rdma, filepath.Join(out, initrdFile)); err != nil {
		return fail(err)
	}
	if err := os.Rename(out, dir); err != nil {
		return fail(err)
	}
	return nil
}

// download fetches Debian package pkg into dir with apt-get download and
// returns the path of the .deb.
func download(ctx context.Context, h *host, pkg, dir string) (string, error) {
	for {
		_, err := runTool(ctx, dir, h.tools["apt-get"], "download", pkg)
		if err == nil {
			debs, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.deb"))
			if len(debs) == 1 {
				return debs[0], nil
			}
			err = fmt.Errorf("apt-get download %s left %d packages", pkg, len(debs))
		}
		if ctx.Err() != nil {
			return "", xerrorf("prepare", ctx.Err(), "downloading %s", pkg)
		}
		if prep.updated {
			return "", unavailable("cannot download the kernel: %v", err)
		}
		if err := aptUpdate(ctx, h); err != nil {
			return "", err
		}
	}
}

// showDepends returns the modules to load, in order, for names and their
// dependencies, leaving out those of skip.
func showDepends(ctx context.Context, h *host, tree, kver string, names []string, skip []module) ([]module, error) {
	args := append([]string{"-d", tree, "-S", kver, "--show-depends", "-a"}, names...)
	out, err := runTool(ctx, "", h.tools["modprobe"], args...)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range skip {
		seen[m.path] = true
	}
	var mods []module
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "insmod /…/x.ko [params]" or "builtin x".
		rest, ok := strings.CutPrefix(sc.Text(), "insmod ")
		if !ok {
			continue
		}
		p, params, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if !seen[p] {
			seen[p] = true
			mods = append(mods, module{path: p, params: strings.TrimSpace(params)})
		}
	}
	return mods, nil
}

// moduleGuestPath is where the guest keeps module m of tree: its path in
// the package, with the .xz of a compressed module dropped (the image
// holds it decompressed: busybox's insmod reads plain modules).
func moduleGuestPath(tree string, m module) (string, error) {
	rel, err := filepath.Rel(tree, m.path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("module %s is outside the package", m.path)
	}
	return strings.TrimSuffix(guestPath("/"+filepath.ToSlash(rel)), ".xz"), nil
}

// extractKernel writes the ELF vmlinux inside vmlinuz to dst: the first
// xz or gzip stream that decompresses to an ELF file. Without one it
// copies vmlinuz itself, which qemu boots more slowly, through the BIOS.
func extractKernel(ctx context.Context, xz, vmlinuz, dst string) error {
	data, err := os.ReadFile(vmlinuz)
	if err != nil {
		return err
	}
	try := func(decompress func(w io.Writer) error) bool {
		f, err := os.Create(dst)
		if err != nil {
			return false
		}
		w := bufio.NewWriterSize(f, 1<<20)
		err = decompress(w)
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return false
		}
		head := make([]byte, 4)
		f, err = os.Open(dst)
		if err != nil {
			return false
		}
		defer f.Close()
		_, err = io.ReadFull(f, head)
		return err == nil && string(head) == elf4
	}
	for _, at := range offsets(data, "\xfd7zXZ\x00", 4) {
		ok := try(func(w io.Writer) error {
			cmd := exec.CommandContext(ctx, xz, "-dc", "--single-stream")
			cmd.Stdin, cmd.Stdout = bytes.NewReader(data[at:]), w
			return cmd.Run()
		})
		if ok {
			return nil
		}
	}
	for _, at := range offsets(data, "\x1f\x8b\x08", 4) {
		ok := try(func(w io.Writer) error {
			z, err := gzip.NewReader(bytes.NewReader(data[at:]))
			if err != nil {
				return err
			}
			z.Multistream(false)
			_, err = io.Copy(w, z)
			return err
		})
		if ok {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return os.WriteFile(dst, data, 0o644)
}

// offsets returns where magic occurs in data, at most n of them.
func offsets(data []byte, magic string, n int) []int {
	var at []int
	for off := 0; len(at) < n; {
		i := bytes.Index(data[off:], []byte(magic))
		if i < 0 {
			break
		}
		at = append(at, off+i)
		off += i + 1
	}
	return at
}

// writeBase writes the base initramfs: the init script, busybox, the
// modules, the RDMA tools and references with their libraries, and the
// soft-RoCE provider.
func writeBase(ctx context.Context, h *host, tree, kver string, virtio, rdma []module, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	a := newArchive(f)
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/root", "/etc", "/usr/bin", "/usr/sbin", "/usr/lib64", "/usr/libexec/busybox", "/usr/local/bin"} {
		a.dir(d)
	}
	for _, l := range usrLinks {
		a.symlink(l[0], l[1])
	}
	a.charDev("/dev/console", 0o600, 5, 1)

	var loads [2]strings.Builder
	for i, mods := range [][]module{virtio, rdma} {
		for _, m := range mods {
			gp, err := moduleGuestPath(tree, m)
			if err != nil {
				return err
			}
			if strings.HasSuffix(m.path, ".xz") {
				out, err := runTool(ctx, "", h.tools["xz"], "-dc", m.path)
				if err != nil {
					return err
				}
				a.text(gp, 0o644, string(out))
			} else {
				a.hostFile(gp, m.path)
			}
			fmt.Fprintf(&loads[i], "load %s %s\n", gp, m.params)
		}
	}
	a.text("/init", 0o755, initScript(loads[0].String(), loads[1].String()))

	files, err := closure(ctx, h.tools["ldd"], append(append([]string{}, h.guest...), h.provider)...)
	if err != nil {
		return err
	}
	libc := ""
	for _, p := range files {
		a.hostFile(guestPath(p), p)
		if path.Base(p) == "libc.so.6" {
			libc = p
		}
	}
	// glibc loads libgcc_s when a thread is cancelled or unwinds; ldd does
	// not list it. It lives beside libc.
	if libc == "" {
		return fmt.Errorf("no libc.so.6 among the libraries of %s", h.guest)
	}
	gcc := filepath.Join(filepath.Dir(libc), "libgcc_s.so.1")
	a.hostFile(guestPath(gcc), gcc)
	a.hostFile(h.conf, h.conf)
	if err := a.close(); err != nil {
		return err
	}
	return f.Close()
}

// The guest's network: the address of its dummy netdev, and GID index 1 of
// rxe0, the RoCE v2 GID made of that address.
const guestGID = "0000:0000:0000:0000:0000:ffff:c000:0201"

// initTemplate is the guest's /init, a busybox sh script. @VIRTIO@ and
// @RDMA@ are replaced by "load MODULE PARAMS" lines. It loads the virtio
// modules, finds the two virtio-serial ports (output, and status: "ready",
// then "exit CODE", or "fail REASON"), sets up soft-RoCE on a dummy
// netdev, runs /xpu/job.sh with its output on the output port, reports its
// exit status and powers off. Messages of its own go to the console.
const initTemplate = `#!/usr/bin/busybox sh
/usr/bin/busybox --install -s /usr/libexec/busybox
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/usr/libexec/busybox
export HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
st=0
die() {
	echo "rdmavm init: $*" >/dev/console
	[ $st = 1 ] && echo "fail $*" >&3
	poweroff -f
	sleep 60
}
load() { insmod "$@" || die "insmod $1 failed"; }
@VIRTIO@
port() {
	for d in /sys/class/virtio-ports/*; do
		if [ "$(cat "$d/name" 2>/dev/null)" = "$1" ] && [ -c "/dev/${d##*/}" ]; then
			echo "/dev/${d##*/}"
			return 0
		fi
	done
	return 1
}
i=0
until out=$(port xpu.out) && status=$(port xpu.status); do
	i=$((i+1))
	[ $i -lt 1000 ] || die "no virtio-serial ports"
	usleep 10000
done
exec 3>"$status"
st=1
@RDMA@
ip link set lo up || die "cannot bring lo up"
ip link show @NETDEV@ >/dev/null 2>&1 || ip link add @NETDEV@ type dummy || die "cannot add @NETDEV@"
ip addr add @ADDR@/24 dev @NETDEV@ || die "cannot address @NETDEV@"
ip link set @NETDEV@ up || die "cannot bring @NETDEV@ up"
rdma link add @DEVICE@ type rxe netdev @NETDEV@ || die "cannot add @DEVICE@"
p=/sys/class/infiniband/@DEVICE@/ports/1
i=0
until [ -c /dev/infiniband/uverbs0 ] && grep -q ACTIVE $p/state 2>/dev/null && [ "$(cat $p/gids/@GID_INDEX@ 2>/dev/null)" = @GID@ ]; do
	i=$((i+1))
	[ $i -lt 2000 ] || die "@DEVICE@ did not come up: $(cat $p/state 2>&1)"
	usleep 10000
done
ulimit -l unlimited
export XPU_RDMAVM_ADDR=@ADDR@ XPU_RDMAVM_DEVICE=@DEVICE@ XPU_RDMAVM_GID_INDEX=@GID_INDEX@
echo ready >&3
cd /root
(. /xpu/env && exec /usr/bin/busybox sh /xpu/job.sh) </dev/null >"$out" 2>&1 3>&-
echo "exit $?" >&3
exec 3>&-
poweroff -f
sleep 60
`

func initScript(virtio, rdma string) string {
	return strings.NewReplacer(
		"@VIRTIO@", strings.TrimSpace(virtio),
		"@RDMA@", strings.TrimSpace(rdma),
		"@NETDEV@", Netdev,
		"@ADDR@", Addr,
		"@DEVICE@", Device,
		"@GID_INDEX@", strconv.Itoa(GIDIndex),
		"@GID@", guestGID,
	).Replace(initTemplate)
}
