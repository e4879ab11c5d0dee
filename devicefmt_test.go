package xpu_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
)

func intp(n int) *int { return &n }

// A device with only the fields every backend sets is written as before
// the optional fields existed, in JSON and in its Summary.
func TestDeviceWithoutOptionalFields(t *testing.T) {
	d := xpu.Device{Index: 0, Name: "host", MemoryTotal: 8 << 30, MemoryFree: -1}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, `{"index":0,"name":"host","memory_total":8589934592,"memory_free":-1}`, string(b))
	assert.Equal(t, "host, memory 8.0 GiB total, unknown free", d.Summary())
	assert.Empty(t, d.Details())
	assert.Equal(t, "x, memory 512 B total, 1.5 KiB free", xpu.Device{Name: "x", MemoryTotal: 512, MemoryFree: 1536}.Summary())
}

func TestDeviceOptionalFields(t *testing.T) {
	d := xpu.Device{
		Index: 1, Name: "NVIDIA H100 80GB HBM3", MemoryTotal: 80 << 30, MemoryFree: 79<<30 + 1<<29,
		UUID: "GPU-1", ComputeCapability: "9.0", PCIBusID: "0000:18:00.0", NUMANode: intp(0),
		CPUAffinity: []int{0, 1, 2, 3, 8, 10, 11},
		Links:       []xpu.Link{{Peer: 0, Kind: "nvlink", NVLinks: 18}, {Peer: 2, Kind: "pcie", Level: "system"}},
	}
	assert.Equal(t, "NVIDIA H100 80GB HBM3, memory 80.0 GiB total, 79.5 GiB free, compute capability 9.0, PCI 0000:18:00.0, NUMA node 0", d.Summary())
	assert.Equal(t, "UUID GPU-1, CPUs 0-3,8,10-11", d.Details())

	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, `{"index":1,"name":"NVIDIA H100 80GB HBM3","memory_total":85899345920,"memory_free":85362475008,
		"uuid":"GPU-1","compute_capability":"9.0","pci_bus_id":"0000:18:00.0","numa_node":0,
		"cpu_affinity":[0,1,2,3,8,10,11],
		"links":[{"peer":0,"kind":"nvlink","nvlinks":18},{"peer":2,"kind":"pcie","level":"system"}]}`, string(b))
	var back xpu.Device
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, d, back)
}

func TestTopologyMatrix(t *testing.T) {
	assert.Empty(t, xpu.TopologyMatrix(nil))
	devs := []xpu.Device{
		{Index: 0, NUMANode: intp(0), CPUAffinity: []int{0, 1, 2, 3}, Links: []xpu.Link{
			{Peer: 1, Kind: "nvlink", NVLinks: 12}, {Peer: 2, Kind: "pcie", Level: "internal"}, {Peer: 3, Kind: "pcie", Level: "single"}}},
		{Index: 1, NUMANode: intp(0), CPUAffinity: []int{0, 1, 2, 3}, Links: []xpu.Link{
			{Peer: 0, Kind: "nvlink", NVLinks: 12}, {Peer: 2, Kind: "pcie", Level: "level60"}}},
		{Index: 2, NUMANode: intp(1), CPUAffinity: []int{4}, Links: []xpu.Link{
			{Peer: 0, Kind: "pcie", Level: "internal"}, {Peer: 1, Kind: "pcie", Level: "level60"}, {Peer: 3, Kind: "pcie", Level: "system"}}},
		{Index: 3, Links: []xpu.Link{
			{Peer: 0, Kind: "pcie", Level: "single"}, {Peer: 2, Kind: "pcie", Level: "system"}}},
	}
	assert.Equal(t, ""+
		"      GPU0  GPU1  GPU2  GPU3  CPU Affinity  NUMA Affinity\n"+
		"GPU0  X     NV12  INT   PIX   0-3           0\n"+
		"GPU1  NV12  X     N/A   N/A   0-3           0\n"+
		"GPU2  INT   N/A   X     SYS   4             1\n"+
		"GPU3  PIX   N/A   SYS   X     N/A           N/A\n"+
		"\n"+
		"Legend:\n"+
		"  X    = self\n"+
		"  NV#  = a bonded set of # NVLinks\n"+
		"  INT  = PCIe, within one board\n"+
		"  PIX  = PCIe, through at most one PCIe bridge\n"+
		"  SYS  = PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)\n"+
		"  N/A  = unknown\n", xpu.TopologyMatrix(devs))
}

func TestNetworkDeviceSummaryAndPorts(t *testing.T) {
	d := xpu.Device{Name: "rxe0", MemoryTotal: -1, MemoryFree: -1, Transport: "RoCE", MaxRegion: 1 << 40,
		Ports: []xpu.Port{{Num: 1, State: "ACTIVE", LinkLayer: "Ethernet", MTU: 1024, Netdev: "dummy0", Addr: "192.0.2.1",
			GIDs: []string{"fe80::1", "::ffff:192.0.2.1"}}}}
	require.Equal(t, "rxe0, RoCE, largest memory region 1.0 TiB", d.Summary())
	require.Equal(t, "port 1: ACTIVE, Ethernet, MTU 1024, dummy0 192.0.2.1, GIDs fe80::1, ::ffff:192.0.2.1", d.Ports[0].String())
	require.Equal(t, "port 2: DOWN, InfiniBand, MTU 4096", xpu.Port{Num: 2, State: "DOWN", LinkLayer: "InfiniBand", MTU: 4096}.String())
}
