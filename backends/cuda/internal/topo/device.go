package topo

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/xpu-go/xpu"
)

// Link kinds: the values of Link.Kind.
const (
	// KindNVLink is a path over NVLinks, direct or through NVSwitches.
	KindNVLink = "nvlink"
	// KindPCIe is a path through the PCIe hierarchy (and, at the node and
	// system levels, the host's interconnect).
	KindPCIe = "pcie"
)

// PCIe levels: the values of Link.Level, the names of NVML's topology
// levels (nvmlGpuTopologyLevel_t), nearest first.
const (
	LevelInternal   = "internal"   // the same board (a multi-GPU board)
	LevelSingle     = "single"     // through at most one PCIe switch
	LevelMultiple   = "multiple"   // through several PCIe switches, no host bridge
	LevelHostBridge = "hostbridge" // through a PCIe host bridge
	LevelNode       = "node"       // through the host bridges of one NUMA node
	LevelSystem     = "system"     // across NUMA nodes
)

// Device is one GPU as NVML describes it. A field NVML cannot report on
// this GPU (its call answers not supported) is left unknown: "" for a
// string, -1 for a number, nil for a list.
type Device struct {
	// Index is the GPU's NVML index (0, 1, …), which is not necessarily
	// its CUDA ordinal: match the two by PCIBusID.
	Index int
	// Name is the product name ("NVIDIA H100 80GB HBM3").
	Name string
	// UUID is the GPU's persistent identifier ("GPU-8f6c…").
	UUID string
	// ComputeCapability is the CUDA compute capability, major.minor ("9.0").
	ComputeCapability string
	// MemoryTotal and MemoryFree are the GPU's memory and what of it is
	// free, in bytes; -1 when unknown.
	MemoryTotal, MemoryFree int64
	// PCIBusID is the GPU's PCI address in the form NormalizeBusID
	// writes: "0000:18:00.0".
	PCIBusID string
	// NUMANode is the NUMA node nearest the GPU; -1 when unknown.
	NUMANode int
	// CPUAffinity lists, in increasing order, the CPUs of the GPU's ideal
	// affinity mask: those nearest it.
	CPUAffinity []int
	// Links holds the path to every other GPU whose path is known, in
	// increasing order of Peer.
	Links []Link
}

// Link is the path from a GPU to one of its peers.
type Link struct {
	// Peer is the Index of the GPU at the other end.
	Peer int
	// Kind is KindNVLink or KindPCIe.
	Kind string
	// NVLinks is the number of active NVLinks joining the two GPUs, 0 for
	// a PCIe path. Through NVSwitches it is the smaller of the two GPUs'
	// counts of links to switches, the figure `nvidia-smi topo -m` shows.
	NVLinks int
	// Level is, for a PCIe path, the level of the GPUs' nearest common
	// ancestor: LevelInternal … LevelSystem. Empty for NVLink.
	Level string
}

// XPU returns d as the project's device description, for a backend's
// xpu.Info: a NUMANode of -1 becomes nil.
func (d Device) XPU() xpu.Device {
	x := xpu.Device{
		Index:             d.Index,
		Name:              d.Name,
		MemoryTotal:       d.MemoryTotal,
		MemoryFree:        d.MemoryFree,
		UUID:              d.UUID,
		ComputeCapability: d.ComputeCapability,
		PCIBusID:          d.PCIBusID,
		CPUAffinity:       slices.Clone(d.CPUAffinity),
	}
	if d.NUMANode >= 0 {
		n := d.NUMANode
		x.NUMANode = &n
	}
	for _, l := range d.Links {
		x.Links = append(x.Links, xpu.Link{Peer: l.Peer, Kind: l.Kind, NVLinks: l.NVLinks, Level: l.Level})
	}
	return x
}

// Summary describes the GPU on one line: name, memory, compute capability,
// PCI address and NUMA node, as xpu.Device.Summary writes them.
func (d Device) Summary() string { return d.XPU().Summary() }

// Matrix writes the links between devs as a topology matrix in the manner
// of `nvidia-smi topo -m` (GPU0 … GPUn rows and columns of X, NV18, PIX,
// PXB, PHB, NODE, SYS cells, then each GPU's CPU and NUMA affinity, and a
// legend), as xpu.TopologyMatrix writes it.
func Matrix(devs []Device) string {
	xs := make([]xpu.Device, len(devs))
	for i, d := range devs {
		xs[i] = d.XPU()
	}
	return xpu.TopologyMatrix(xs)
}

// NormalizeBusID writes a PCI address as domain:bus:device.function in
// lower-case hexadecimal with a domain of at least four digits, so that
// the addresses of NVML ("00000000:18:00.0"), of CUDA and of sysfs
// ("0000:18:00.0") compare equal. An address without a domain gets domain
// 0. A string it cannot parse comes back trimmed and in lower case; an
// empty one stays empty.
func NormalizeBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(strings.TrimRight(s, "\x00")))
	parts := strings.Split(s, ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return s
	}
	devfn := strings.Split(parts[2], ".")
	if len(devfn) != 2 {
		return s
	}
	var n [4]uint64
	for i, f := range []string{parts[0], parts[1], devfn[0], devfn[1]} {
		v, err := strconv.ParseUint(f, 16, 32)
		if err != nil {
			return s
		}
		n[i] = v
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", n[0], n[1], n[2], n[3])
}

// cpusFromMask returns the numbers of the CPUs whose bits are set in mask,
// words of bits.UintSize CPUs each, the lowest CPU in the lowest bit of
// the first word, as nvmlDeviceGetCpuAffinity fills it; nil for none.
func cpusFromMask(mask []uint) []int {
	var cpus []int
	for w, word := range mask {
		for word != 0 {
			b := bits.TrailingZeros(word)
			cpus = append(cpus, w*bits.UintSize+b)
			word &^= 1 << b
		}
	}
	return cpus
}
