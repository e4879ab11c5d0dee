package fakecuda

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// sources are the fake's C files, written out and compiled by Build.
//
//go:embed csrc/*.c csrc/*.h
var sources embed.FS

// LibName is the file name of the library Build produces: the soname of
// the real driver.
const LibName = "libcuda.so.1"

// cflags are the compiler flags of the library; they are part of the
// cache key.
var cflags = []string{
	"-shared", "-fPIC", "-O2", "-g", "-std=gnu11", "-ffp-contract=off",
	"-Wall", "-Wextra", "-pthread", "-fvisibility=hidden",
	"-Wl,-soname," + LibName,
}

var build struct {
	sync.Mutex
	path string
	err  error
}

// Build compiles the fake with the C compiler ($CC, else gcc) once per
// process and returns the path of the library. The result is cached in
// the system's temporary directory under a name derived from a hash of the
// sources and flags (xpu-fakecuda-<hash>/libcuda.so.1), written atomically,
// so parallel test processes share one build without racing.
func Build() (string, error) {
	build.Lock()
	defer build.Unlock()
	if build.path == "" && build.err == nil {
		build.path, build.err = compile()
	}
	return build.path, build.err
}

func compiler() []string {
	if cc := strings.Fields(os.Getenv("CC")); len(cc) > 0 {
		return cc
	}
	return []string{"gcc"}
}

// files returns the embedded sources by name, in a stable order.
func files() ([]string, map[string][]byte, error) {
	ents, err := fs.ReadDir(sources, "csrc")
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(ents))
	data := make(map[string][]byte, len(ents))
	for _, e := range ents {
		b, err := sources.ReadFile("csrc/" + e.Name())
		if err != nil {
			return nil, nil, err
		}
		names = append(names, e.Name())
		data[e.Name()] = b
	}
	sort.Strings(names)
	return names, data, nil
}

func compile() (string, error) {
	names, data, err := files()
	if err != nil {
		return "", fmt.Errorf("fakecuda: reading sources: %w", err)
	}
	cc := compiler()
	h := sha256.New()
	fmt.Fprintf(h, "%q %q\n", cc, cflags)
	for _, n := range names {
		fmt.Fprintf(h, "%s %d\n", n, len(data[n]))
		h.Write(data[n])
	}
	dir := filepath.Join(os.TempDir(), "xpu-fakecuda-"+hex.EncodeToString(h.Sum(nil))[:20])
	lib := filepath.Join(dir, LibName)
	if fi, err := os.Stat(lib); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
		return lib, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	defer os.RemoveAll(work)
	args := append([]string{}, cc[1:]...)
	args = append(args, cflags...)
	out := filepath.Join(work, LibName)
	args = append(args, "-o", out)
	for _, n := range names {
		p := filepath.Join(work, n)
		if err := os.WriteFile(p, data[n], 0o644); err != nil {
			return "", fmt.Errorf("fakecuda: %w", err)
		}
		if strings.HasSuffix(n, ".c") {
			args = append(args, p)
		}
	}
	args = append(args, "-lm")
	cmd := exec.Command(cc[0], args...)
	var msg bytes.Buffer
	cmd.Stdout = &msg
	cmd.Stderr = &msg
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("fakecuda: compiling the fake driver with %s: %w\n%s", cc[0], err, msg.String())
	}
	// The rename is atomic: a concurrent process sees no file or a
	// complete one (identical, as the name is a hash of the inputs).
	if err := os.Rename(out, lib); err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	return lib, nil
}

// Copy returns the path of a private copy of the library, a new file in
// dir: dir/libcuda.so.1 if that name is free, else dir/libcuda-*.so.1.
// Loading it gives an instance of the fake with state of its own (dlopen of
// a different file is a different library), configured from the
// environment at the time of its cuInit.
func Copy(dir string) (string, error) {
	lib, err := Build()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(lib)
	if err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, LibName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if errors.Is(err, fs.ErrExist) {
		f, err = os.CreateTemp(dir, "libcuda-*.so.1")
	}
	if err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	return f.Name(), nil
}

// Fault is a kind of fault Control.Inject arranges.
type Fault int

// The faults of Control.Inject.
const (
	// FaultOOM makes the next count allocations (cuMemAlloc_v2,
	// cuMemAllocManaged, cuMemHostAlloc) on the device fail with
	// CUDA_ERROR_OUT_OF_MEMORY.
	FaultOOM Fault = 1
	// FaultLaunch makes the next count kernel executions on the device
	// fail with CUDA_ERROR_LAUNCH_FAILED, sticky on its context.
	FaultLaunch Fault = 2
	// FaultIllegalAddress makes the next count kernel executions on the
	// device fault with CUDA_ERROR_ILLEGAL_ADDRESS, sticky on its
	// context.
	FaultIllegalAddress Fault = 3
	// FaultDeviceLost makes the device unavailable until Reset: calls
	// about it fail with CUDA_ERROR_DEVICE_UNAVAILABLE, its queued work
	// is dropped and waits on it end with that error. Its primary
	// context, if retained, stays failed with that error until it is
	// released to a reference count of 0, even after Reset.
	FaultDeviceLost Fault = 4
	// FaultCopy makes the next count copies executed in the device's
	// context (synchronous ones made with it current, and those in
	// stream order on its streams) fail with CUDA_ERROR_ILLEGAL_ADDRESS,
	// sticky on its context.
	FaultCopy Fault = 5
)

// String returns the fault's name.
func (f Fault) String() string {
	switch f {
	case FaultOOM:
		return "FaultOOM"
	case FaultLaunch:
		return "FaultLaunch"
	case FaultIllegalAddress:
		return "FaultIllegalAddress"
	case FaultDeviceLost:
		return "FaultDeviceLost"
	case FaultCopy:
		return "FaultCopy"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Stats are the fake's counters, read by Control.Stats.
type Stats struct {
	DeviceAllocs   int64 // live device allocations, all devices
	DeviceBytes    int64 // bytes of live device allocations, as requested
	PinnedAllocs   int64 // live cuMemHostAlloc allocations
	ManagedAllocs  int64 // live cuMemAllocManaged allocations
	Streams        int64 // live streams
	Events         int64 // live events
	Modules        int64 // loaded modules
	ContextRefs    int64 // primary-context references retained, all devices
	Leaked         int64 // objects destroyed by a context reset, in total
	KernelLaunches int64 // kernels executed without a fault, in total
	AsyncCopies    int64 // asynchronous copies executed, in total
	IPCMappings    int64 // IPC handles of other processes mapped here (each once, however often opened)
	IPCOpens       int64 // successful cuIpcOpenMemHandle calls, in total (an open of a mapped handle counts too)
	IPCExports     int64 // live allocations of this process with an IPC handle taken
}

// statsLen is the number of counters fakecuda_stats reports.
const statsLen = 14

// Live reports the objects still alive: allocations of every kind,
// streams, events, modules, context references and IPC mappings. It is 0
// when everything a test created has been released.
func (s Stats) Live() int64 {
	return s.DeviceAllocs + s.PinnedAllocs + s.ManagedAllocs + s.Streams + s.Events + s.Modules + s.ContextRefs +
		s.IPCMappings
}

func statsFrom(v [statsLen]int64) Stats {
	return Stats{
		DeviceAllocs: v[0], DeviceBytes: v[1], PinnedAllocs: v[2], ManagedAllocs: v[3],
		Streams: v[4], Events: v[5], Modules: v[6], ContextRefs: v[7],
		Leaked: v[8], KernelLaunches: v[9], AsyncCopies: v[10],
		IPCMappings: v[11], IPCOpens: v[12], IPCExports: v[13],
	}
}

// The layout of the fake's IPC handles (CUipcMemHandle, 64 bytes), for
// tests that forge or alter one: the bytes of the exporting machine's
// boot id, and those of the exporting process's id. A handle whose boot
// id differs from this machine's fails to open with
// CUDA_ERROR_INVALID_DEVICE; any other altered byte fails a checksum
// (CUDA_ERROR_INVALID_VALUE).
const (
	IPCHandleSize       = 64
	IPCHandleBootID     = 8  // 16 bytes
	IPCHandleBootIDSize = 16 // bytes
)

// DeviceStats are the fake's counters of one device, read by
// Control.DeviceStats.
type DeviceStats struct {
	DeviceAllocs   int64 // live device allocations on the device
	DeviceBytes    int64 // bytes of those allocations, as requested
	ContextRefs    int64 // references to its primary context retained
	KernelLaunches int64 // kernels executed in its context without a fault, in total
}

func deviceStatsFrom(v [4]int64) DeviceStats {
	return DeviceStats{DeviceAllocs: v[0], DeviceBytes: v[1], ContextRefs: v[2], KernelLaunches: v[3]}
}
