//go:build cgo

package topo

import (
	"bytes"
	"fmt"
	"runtime"

	"github.com/NVIDIA/go-nvml/pkg/dl"
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/xpu-go/xpu/xerr"
)

// LibraryName is the NVML library Open loads, found on the dynamic
// loader's search path as the driver installs it.
const LibraryName = "libnvidia-ml.so.1"

// The place errors name: the backend and the operation.
const (
	backend    = "cuda"
	opOpen     = "nvml open"
	opDiscover = "nvml discover"
)

// Symbols of NVML newer than the rest of what Discover calls: it calls
// them only when the library has them, as a call of a missing one would
// end the process.
const (
	symNumaNodeID       = "nvmlDeviceGetNumaNodeId"
	symNvLinkRemoteType = "nvmlDeviceGetNvLinkRemoteDeviceType"
)

// minAffinityCPUs is the least number of CPUs Discover makes room for in
// a CPU affinity mask.
const minAffinityCPUs = 1024

// Open returns the system's NVML, LibraryName, ready for Discover (which
// initialises it). When the library cannot be loaded (no NVIDIA driver
// installed) it returns an error matching xerr.ErrUnavailable with the
// dynamic loader's reason.
func Open() (nvml.Interface, error) {
	probe := dl.New(LibraryName, dl.RTLD_LAZY|dl.RTLD_LOCAL)
	if err := probe.Open(); err != nil {
		return nil, xerr.Errorf(backend, opOpen, xerr.ErrUnavailable, "no NVIDIA driver library: %w", err)
	}
	if err := probe.Close(); err != nil {
		return nil, xerr.Errorf(backend, opOpen, xerr.ErrUnavailable, "closing %s after probing it: %w", LibraryName, err)
	}
	return nvml.New(nvml.WithLibraryPath(LibraryName)), nil
}

// DiscoverLocal discovers the GPUs of this machine: Discover over Open's
// library. Its errors are theirs.
func DiscoverLocal() ([]Device, error) {
	lib, err := Open()
	if err != nil {
		return nil, err
	}
	return Discover(lib)
}

// Discover initialises lib, describes every GPU it enumerates, in the
// order of their NVML indices, and shuts lib down.
//
// The name and UUID of each GPU are required; every other field is
// optional: where NVML answers that it does not support the query on this
// GPU, or that the driver lacks the function, the field is left unknown
// (see Device). The links come from walking each GPU's NVLinks: an active
// link whose far end is another GPU (found by its PCI address) counts for
// that GPU, and one whose far end is an NVSwitch connects the GPU to every
// other GPU with links to switches. GPUs without NVLinks between them get
// the level of their nearest common PCIe ancestor.
//
// Errors name the GPU and the NVML function that failed, and wrap the
// nvml.Return (errors.Is(err, nvml.ERROR_NO_PERMISSION) works). An
// initialisation that fails — library missing, kernel driver not loaded,
// library and driver of different versions — matches xerr.ErrUnavailable,
// as does a later failure, except a GPU that fell off the bus
// (nvml.ERROR_GPU_IS_LOST), which matches xerr.ErrDeviceLost.
func Discover(lib nvml.Interface) (devs []Device, err error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, initError(ret)
	}
	defer func() {
		if ret := lib.Shutdown(); ret != nvml.SUCCESS && err == nil {
			devs, err = nil, callError(-1, "nvmlShutdown", ret)
		}
	}()
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, callError(-1, "nvmlDeviceGetCount", ret)
	}
	ext := lib.Extensions()
	hasNuma := ext.LookupSymbol(symNumaNodeID) == nil
	hasRemoteType := ext.LookupSymbol(symNvLinkRemoteType) == nil

	handles := make([]nvml.Device, n)
	devs = make([]Device, n)
	for i := range n {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, callError(i, "nvmlDeviceGetHandleByIndex", ret)
		}
		handles[i] = h
		if devs[i], err = describe(i, h, hasNuma); err != nil {
			return nil, err
		}
	}
	if err := addLinks(devs, handles, hasRemoteType); err != nil {
		return nil, err
	}
	return devs, nil
}

// describe reads the fields of GPU i, h, but its links.
func describe(i int, h nvml.Device, hasNuma bool) (Device, error) {
	d := Device{Index: i, MemoryTotal: -1, MemoryFree: -1, NUMANode: -1}
	var ret nvml.Return
	if d.Name, ret = h.GetName(); ret != nvml.SUCCESS {
		return d, callError(i, "nvmlDeviceGetName", ret)
	}
	if d.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
		return d, callError(i, "nvmlDeviceGetUUID", ret)
	}

	major, minor, ret := h.GetCudaComputeCapability()
	if err := optional(i, "nvmlDeviceGetCudaComputeCapability", ret); err != nil {
		return d, err
	}
	if ret == nvml.SUCCESS {
		d.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}

	mem, ret := h.GetMemoryInfo()
	if err := optional(i, "nvmlDeviceGetMemoryInfo", ret); err != nil {
		return d, err
	}
	if ret == nvml.SUCCESS {
		d.MemoryTotal, d.MemoryFree = int64(mem.Total), int64(mem.Free)
	}

	pci, ret := h.GetPciInfo()
	if err := optional(i, "nvmlDeviceGetPciInfo", ret); err != nil {
		return d, err
	}
	if ret == nvml.SUCCESS {
		d.PCIBusID = NormalizeBusID(busID(pci))
	}

	if hasNuma {
		node, ret := h.GetNumaNodeId()
		if err := optional(i, "nvmlDeviceGetNumaNodeId", ret); err != nil {
			return d, err
		}
		if ret == nvml.SUCCESS {
			d.NUMANode = node
		}
	}

	mask, ret := h.GetCpuAffinity(max(runtime.NumCPU(), minAffinityCPUs))
	if err := optional(i, "nvmlDeviceGetCpuAffinity", ret); err != nil {
		return d, err
	}
	if ret == nvml.SUCCESS {
		d.CPUAffinity = cpusFromMask(mask)
	}
	return d, nil
}

// addLinks fills in the Links of devs, whose NVML handles are handles.
func addLinks(devs []Device, handles []nvml.Device, hasRemoteType bool) error {
	n := len(devs)
	byBus := make(map[string]int, n)
	for i, d := range devs {
		if d.PCIBusID != "" {
			byBus[d.PCIBusID] = i
		}
	}
	direct := make([][]int, n) // direct[i][j]: NVLinks from GPU i to GPU j
	toSwitch := make([]int, n) // NVLinks from GPU i to NVSwitches
	for i, h := range handles {
		var err error
		if direct[i], toSwitch[i], err = gpuNVLinks(i, n, h, byBus, hasRemoteType); err != nil {
			return err
		}
	}
	level, err := pcieLevels(n, handles, direct, toSwitch)
	if err != nil {
		return err
	}

	for i := range devs {
		for j := range n {
			switch {
			case i == j:
			case nvlinks(direct, toSwitch, i, j) > 0:
				devs[i].Links = append(devs[i].Links, Link{Peer: j, Kind: KindNVLink, NVLinks: nvlinks(direct, toSwitch, i, j)})
			case level[i][j] != "":
				devs[i].Links = append(devs[i].Links, Link{Peer: j, Kind: KindPCIe, Level: level[i][j]})
			}
		}
	}
	return nil
}

// gpuNVLinks walks the NVLinks of GPU i of n, whose handle is h, and
// returns how many join it to each GPU (byBus finds them by bus ID) and to
// NVSwitches.
func gpuNVLinks(i, n int, h nvml.Device, byBus map[string]int, hasRemoteType bool) (direct []int, toSwitch int, err error) {
	direct = make([]int, n)
	for link := range nvml.NVLINK_MAX_LINKS {
		state, ret := h.GetNvLinkState(link)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_FUNCTION_NOT_FOUND:
			return direct, toSwitch, nil // past the GPU's last link, or no NVLink API
		case nvml.ERROR_NOT_SUPPORTED:
			continue // no NVLink here
		default:
			return nil, 0, callError(i, fmt.Sprintf("nvmlDeviceGetNvLinkState(link %d)", link), ret)
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		if hasRemoteType {
			kind, ret := h.GetNvLinkRemoteDeviceType(link)
			if err := optional(i, fmt.Sprintf("nvmlDeviceGetNvLinkRemoteDeviceType(link %d)", link), ret); err != nil {
				return nil, 0, err
			}
			if ret == nvml.SUCCESS {
				switch kind {
				case nvml.NVLINK_DEVICE_TYPE_SWITCH:
					toSwitch++
					continue
				case nvml.NVLINK_DEVICE_TYPE_GPU:
				default:
					continue // a CPU (IBM NPU) or unknown
				}
			}
		}
		pci, ret := h.GetNvLinkRemotePciInfo(link)
		if err := optional(i, fmt.Sprintf("nvmlDeviceGetNvLinkRemotePciInfo(link %d)", link), ret); err != nil {
			return nil, 0, err
		}
		if ret != nvml.SUCCESS {
			continue
		}
		if j, ok := byBus[NormalizeBusID(busID(pci))]; ok && j != i {
			direct[j]++
		}
	}
	return direct, toSwitch, nil
}

// pcieLevels returns the PCIe levels joining the n GPUs whose handles are
// handles, for the pairs NVLink does not join; NVML's answer is the same
// both ways.
func pcieLevels(n int, handles []nvml.Device, direct [][]int, toSwitch []int) ([][]string, error) {
	level := make([][]string, n)
	for i := range level {
		level[i] = make([]string, n)
	}
	for i := range n {
		for j := range n {
			if i == j || nvlinks(direct, toSwitch, i, j) > 0 || level[i][j] != "" {
				continue
			}
			l, ret := handles[i].GetTopologyCommonAncestor(handles[j])
			if err := optional(i, fmt.Sprintf("nvmlDeviceGetTopologyCommonAncestor(GPU %d)", j), ret); err != nil {
				return nil, err
			}
			if ret == nvml.SUCCESS {
				level[i][j], level[j][i] = levelName(l), levelName(l)
			}
		}
	}
	return level, nil
}

// nvlinks is the number of NVLinks joining GPUs i and j: i's direct links
// to j, and, when both have links to NVSwitches, the fewer of the two.
func nvlinks(direct [][]int, toSwitch []int, i, j int) int {
	n := direct[i][j]
	if toSwitch[i] > 0 && toSwitch[j] > 0 {
		n += min(toSwitch[i], toSwitch[j])
	}
	return n
}

// levelName is the name of an NVML topology level (Level*), or
// "level<N>" for one this package does not know.
func levelName(l nvml.GpuTopologyLevel) string {
	switch l {
	case nvml.TOPOLOGY_INTERNAL:
		return LevelInternal
	case nvml.TOPOLOGY_SINGLE:
		return LevelSingle
	case nvml.TOPOLOGY_MULTIPLE:
		return LevelMultiple
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return LevelHostBridge
	case nvml.TOPOLOGY_NODE:
		return LevelNode
	case nvml.TOPOLOGY_SYSTEM:
		return LevelSystem
	}
	return fmt.Sprintf("level%d", int(l))
}

// busID is the PCI address of p as NVML writes it, up to its NUL.
func busID(p nvml.PciInfo) string {
	b := make([]byte, 0, len(p.BusId))
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(bytes.TrimSpace(b))
}

// optional returns nil when ret is a success or says that GPU i does not
// support call (the field stays unknown), and call's error otherwise.
func optional(i int, call string, ret nvml.Return) error {
	switch ret {
	case nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return nil
	}
	return callError(i, call, ret)
}

// callError is the error of NVML function call failing with ret, on GPU
// i (-1: no GPU).
func callError(i int, call string, ret nvml.Return) error {
	sentinel := xerr.ErrUnavailable
	if ret == nvml.ERROR_GPU_IS_LOST {
		sentinel = xerr.ErrDeviceLost
	}
	if i < 0 {
		return xerr.Errorf(backend, opDiscover, sentinel, "%s: %w", call, ret)
	}
	return xerr.Errorf(backend, opDiscover, sentinel, "GPU %d: %s: %w", i, call, ret)
}

// initError is the error of nvmlInit failing with ret, with what the
// usual causes mean.
func initError(ret nvml.Return) error {
	why := ""
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		why = " (" + LibraryName + " not found: no NVIDIA driver installed)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		why = " (the NVIDIA kernel driver is not loaded)"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		why = " (the NVML library and the kernel driver are of different versions: reboot or reload the driver)"
	case nvml.ERROR_NO_PERMISSION:
		why = " (no permission to open the GPUs' device files)"
	}
	return xerr.Errorf(backend, opDiscover, xerr.ErrUnavailable, "nvmlInit: %w%s", ret, why)
}
