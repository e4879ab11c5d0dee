package topo

import (
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu"
)

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:18:00.0":          "0000:18:00.0", // NVML
		"0000:3B:00.0":              "0000:3b:00.0",
		"0000:3b:00.0":              "0000:3b:00.0", // sysfs
		"3b:00.0":                   "0000:3b:00.0", // no domain
		"00010000:01:1f.7":          "10000:01:1f.7",
		" 00000000:AF:00.0\x00\x00": "0000:af:00.0",
		"":                          "",
		"not a bus":                 "not a bus",
		"0000:zz:00.0":              "0000:zz:00.0",
		"0000:18:00":                "0000:18:00",
	} {
		assert.Equal(t, want, NormalizeBusID(in), "%q", in)
	}
}

func TestCPUsFromMask(t *testing.T) {
	assert.Nil(t, cpusFromMask(nil))
	assert.Nil(t, cpusFromMask(make([]uint, 16)))
	mask := []uint{0b1011, 0, 1 << (bits.UintSize - 1)}
	assert.Equal(t, []int{0, 1, 3, 3*bits.UintSize - 1}, cpusFromMask(mask))
}

func TestXPU(t *testing.T) {
	d := Device{Index: 2, Name: "GPU", UUID: "GPU-2", ComputeCapability: "9.0", MemoryTotal: 1 << 30, MemoryFree: -1,
		PCIBusID: "0000:18:00.0", NUMANode: 0, CPUAffinity: []int{0, 1},
		Links: []Link{{Peer: 0, Kind: KindNVLink, NVLinks: 18}, {Peer: 1, Kind: KindPCIe, Level: LevelNode}}}
	zero := 0
	x := d.XPU()
	assert.Equal(t, xpu.Device{Index: 2, Name: "GPU", UUID: "GPU-2", ComputeCapability: "9.0", MemoryTotal: 1 << 30, MemoryFree: -1,
		PCIBusID: "0000:18:00.0", NUMANode: &zero, CPUAffinity: []int{0, 1},
		Links: []xpu.Link{{Peer: 0, Kind: "nvlink", NVLinks: 18}, {Peer: 1, Kind: "pcie", Level: "node"}}}, x)
	x.CPUAffinity[0] = 7
	assert.Equal(t, 0, d.CPUAffinity[0], "XPU copies the affinity")

	d.NUMANode = -1
	assert.Nil(t, d.XPU().NUMANode)
	assert.Equal(t, xpu.Device{Index: 1, Name: "x", MemoryTotal: -1, MemoryFree: -1},
		Device{Index: 1, Name: "x", MemoryTotal: -1, MemoryFree: -1, NUMANode: -1}.XPU(), "unknown fields stay unset")
}

func TestSummaryAndMatrix(t *testing.T) {
	devs := []Device{
		{Index: 0, Name: "NVIDIA H200 141GB HBM3e", ComputeCapability: "9.0", MemoryTotal: 141 << 30, MemoryFree: 140 << 30,
			PCIBusID: "0000:18:00.0", NUMANode: 0, CPUAffinity: []int{0, 1, 2, 3},
			Links: []Link{{Peer: 1, Kind: KindNVLink, NVLinks: 18}}},
		{Index: 1, Name: "NVIDIA H200 141GB HBM3e", ComputeCapability: "9.0", MemoryTotal: 141 << 30, MemoryFree: 140 << 30,
			PCIBusID: "0000:2a:00.0", NUMANode: -1,
			Links: []Link{{Peer: 0, Kind: KindNVLink, NVLinks: 18}}},
	}
	assert.Equal(t, "NVIDIA H200 141GB HBM3e, memory 141.0 GiB total, 140.0 GiB free, compute capability 9.0, PCI 0000:18:00.0, NUMA node 0", devs[0].Summary())
	assert.Equal(t, "NVIDIA H200 141GB HBM3e, memory 141.0 GiB total, 140.0 GiB free, compute capability 9.0, PCI 0000:2a:00.0", devs[1].Summary())
	assert.Equal(t, ""+
		"      GPU0  GPU1  CPU Affinity  NUMA Affinity\n"+
		"GPU0  X     NV18  0-3           0\n"+
		"GPU1  NV18  X     N/A           N/A\n"+
		"\n"+
		"Legend:\n"+
		"  X    = self\n"+
		"  NV#  = a bonded set of # NVLinks\n", Matrix(devs))
	assert.Empty(t, Matrix(nil))
}
