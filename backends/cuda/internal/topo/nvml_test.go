//go:build cgo

package topo

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/xerr"
)

// What go-nvml's mock machines (pkg/nvml/mock/server) provide: Init,
// Shutdown, the device count and handles, LookupSymbol (every symbol is
// there), and per GPU its name, UUID (random, "GPU-…"), CUDA compute
// capability, memory (the total of its model; free 0) and PCI info — but
// only the PCI device id in it: the address, "0000:<index>:00.0", is in the
// mock device's PciBusID field and not in PciInfo.BusId. They do not
// implement (a call panics) the NUMA node, the CPU affinity, the NVLink
// calls or the PCIe topology: the tests below set those, as the machine
// the mock stands for answers them, with setBusID, setNUMA and the
// NVLink and PCIe helpers.

// mockGPUs returns the GPUs of s as the mock's devices.
func mockGPUs(t *testing.T, s *server.Server) []*server.Device {
	t.Helper()
	ds := make([]*server.Device, len(s.Devices))
	for i, d := range s.Devices {
		md, ok := d.(*server.Device)
		require.True(t, ok, "GPU %d is a %T", i, d)
		ds[i] = md
	}
	return ds
}

// setBusID makes d's PCI info carry its address, written as NVML writes
// it (eight digits of domain, upper case), on top of what the mock puts
// there.
func setBusID(d *server.Device) {
	mocked := d.GetPciInfoFunc
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p, ret := mocked()
		putBusID(&p, nvmlBusID(d.PciBusID))
		return p, ret
	}
}

// nvmlBusID writes a "0000:18:00.0" address as NVML does:
// "00000000:18:00.0".
func nvmlBusID(s string) string { return strings.ToUpper("0000" + s) }

func putBusID(p *nvml.PciInfo, s string) {
	p.BusId = [32]int8{}
	for i := 0; i < len(s) && i < len(p.BusId)-1; i++ {
		p.BusId[i] = int8(s[i])
	}
}

// dgxCPUs are the CPUs of a DGX H100/H200/B200's two 56-core sockets
// (with hyper-threads), per NUMA node.
var dgxCPUs = [][]int{append(seq(0, 55), seq(112, 167)...), append(seq(56, 111), seq(168, 223)...)}

func seq(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// setNUMA puts d on NUMA node node, whose CPUs are cpus, as NVML reports
// them: the node's number, and a mask of cpus in as many words as asked.
func setNUMA(t *testing.T, d *server.Device, node int, cpus []int) {
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return node, nvml.SUCCESS }
	d.GetCpuAffinityFunc = func(n int) ([]uint, nvml.Return) {
		assert.GreaterOrEqual(t, n, runtime.NumCPU(), "room in the mask for every CPU")
		assert.GreaterOrEqual(t, n, 1024, "room in the mask for 1024 CPUs")
		mask := make([]uint, (n+63)/64)
		for _, c := range cpus {
			mask[c/64] |= 1 << (c % 64)
		}
		return mask, nvml.SUCCESS
	}
}

// setSwitchLinks gives d links active NVLinks, each to an NVSwitch, and no
// more: the NVLink fabric of a DGX.
func setSwitchLinks(d *server.Device, links int) {
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link >= links {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(link int) (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo // an NVSwitch's address, which is no GPU's
		putBusID(&p, fmt.Sprintf("00000000:%02X:00.0", 0xa0+link%4))
		return p, nvml.SUCCESS
	}
}

// forbidPCIeTopology fails the test if Discover asks for the PCIe path
// between GPUs that NVLink joins.
func forbidPCIeTopology(t *testing.T, d *server.Device) {
	d.GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		t.Errorf("GPU %d: PCIe topology asked for, with every GPU on NVLink", d.Index)
		return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
	}
}

// dgx is one of go-nvml's mock DGX machines and what its GPUs are.
type dgx struct {
	name     string
	new      func() *server.Server
	gpu      gpus.Config
	cc       string
	nvlinks  int // NVLinks per GPU, all to NVSwitches
	numaNode func(gpu int) int
}

var dgxs = []dgx{
	{"DGX H100", dgxh100.New, gpus.H100_SXM5_80GB, "9.0", 18, func(g int) int { return g / 4 }},
	{"DGX H200", dgxh200.New, gpus.H200_SXM5_141GB, "9.0", 18, func(g int) int { return g / 4 }},
	{"DGX B200", dgxb200.New, gpus.B200_SXM5_180GB, "10.0", 18, func(g int) int { return g / 4 }},
	{"DGX A100", dgxa100.New, gpus.A100_SXM4_40GB, "8.0", 12, func(g int) int { return g / 4 }},
}

// complete sets on s's GPUs what the mock does not implement, as the
// machine m answers it, and returns them.
func (m dgx) complete(t *testing.T, s *server.Server) []*server.Device {
	mgs := mockGPUs(t, s)
	for i, d := range mgs {
		setBusID(d)
		setNUMA(t, d, m.numaNode(i), dgxCPUs[m.numaNode(i)])
		setSwitchLinks(d, m.nvlinks)
		forbidPCIeTopology(t, d)
	}
	return mgs
}

func TestDiscoverDGX(t *testing.T) {
	for _, m := range dgxs {
		t.Run(m.name, func(t *testing.T) {
			s := m.new()
			mgs := m.complete(t, s)

			devs, err := Discover(s)
			require.NoError(t, err)
			require.Len(t, devs, 8)
			uuids, buses := map[string]bool{}, map[string]bool{}
			for i, d := range devs {
				assert.Equal(t, i, d.Index)
				assert.Equal(t, m.gpu.Name, d.Name)
				assert.Equal(t, mgs[i].UUID, d.UUID)
				assert.True(t, strings.HasPrefix(d.UUID, "GPU-"), d.UUID)
				uuids[d.UUID] = true
				assert.Equal(t, m.cc, d.ComputeCapability)
				assert.Equal(t, int64(m.gpu.MemoryMB)<<20, d.MemoryTotal)
				assert.Equal(t, int64(0), d.MemoryFree, "the mock's free memory")
				assert.Equal(t, mgs[i].PciBusID, d.PCIBusID, "normalised from %q", nvmlBusID(mgs[i].PciBusID))
				buses[d.PCIBusID] = true
				assert.Equal(t, m.numaNode(i), d.NUMANode)
				assert.Equal(t, dgxCPUs[m.numaNode(i)], d.CPUAffinity)

				// The NVLink mesh: every other GPU, through the switches.
				require.Len(t, d.Links, 7, "GPU %d", i)
				peer := 0
				for _, l := range d.Links {
					if peer == i {
						peer++
					}
					assert.Equal(t, Link{Peer: peer, Kind: KindNVLink, NVLinks: m.nvlinks}, l, "GPU %d", i)
					peer++
				}
			}
			assert.Len(t, uuids, 8, "distinct UUIDs")
			assert.Len(t, buses, 8, "distinct PCI addresses")
			assert.Len(t, s.ShutdownCalls(), 1)

			rows := strings.Split(Matrix(devs), "\n")
			require.Greater(t, len(rows), 9)
			assert.Regexp(t, `^\s+GPU0\s+GPU1\s+GPU2\s+GPU3\s+GPU4\s+GPU5\s+GPU6\s+GPU7\s+CPU Affinity\s+NUMA Affinity$`, rows[0])
			nv := fmt.Sprintf("NV%d", m.nvlinks)
			for i, row := range rows[1:9] {
				cells := strings.Fields(row)
				require.Len(t, cells, 11, row)
				assert.Equal(t, fmt.Sprintf("GPU%d", i), cells[0])
				for j, c := range cells[1:9] {
					if j == i {
						assert.Equal(t, "X", c)
					} else {
						assert.Equal(t, nv, c)
					}
				}
				assert.Equal(t, []string{cpuList(dgxCPUs[i/4]), fmt.Sprint(i / 4)}, cells[9:])
			}
			t.Logf("%s, GPU 0: %s\n%s", m.name, devs[0].Summary(), Matrix(devs))
		})
	}
}

// cpuList writes cpus as the matrix does, for the test's expectations.
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// A PCIe machine of four H100s with NVLink bridges joining GPUs 0 and 1
// (four links) and 2 and 3 (two links), on a driver without the NVLink
// remote device type nor the NUMA node: the links are found by the far
// end's PCI address, the other pairs get their PCIe level, the NUMA node
// and (not supported here) the CPU affinity are unknown.
func TestDiscoverBridgedPCIe(t *testing.T) {
	s := dgxh100.NewWithGPUs(gpus.Multiple(4, gpus.H100_SXM5_80GB)...)
	mgs := mockGPUs(t, s)
	s.LookupSymbolFunc = func(sym string) error {
		switch sym {
		case "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetNumaNodeId":
			return fmt.Errorf("symbol %q not found", sym)
		}
		return nil
	}
	bridged := map[int]struct{ peer, links int }{0: {1, 4}, 1: {0, 4}, 2: {3, 2}, 3: {2, 2}}
	levels := map[[2]int]nvml.GpuTopologyLevel{
		{0, 2}: nvml.TOPOLOGY_HOSTBRIDGE, {0, 3}: nvml.TOPOLOGY_NODE,
		{1, 2}: nvml.TOPOLOGY_SYSTEM, {1, 3}: nvml.TOPOLOGY_MULTIPLE,
	}
	for i, d := range mgs {
		setBusID(d)
		d.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		b := bridged[i]
		d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
			switch {
			case link >= 18:
				return 0, nvml.ERROR_INVALID_ARGUMENT
			case link < b.links:
				return nvml.FEATURE_ENABLED, nvml.SUCCESS
			}
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		d.GetNvLinkRemotePciInfoFunc = func(link int) (nvml.PciInfo, nvml.Return) {
			require.Less(t, link, b.links, "the far end of an inactive link")
			var p nvml.PciInfo
			putBusID(&p, nvmlBusID(mgs[b.peer].PciBusID))
			return p, nvml.SUCCESS
		}
		d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			j := other.(*server.Device).Index
			l, ok := levels[[2]int{min(i, j), max(i, j)}]
			require.True(t, ok, "PCIe level of GPUs %d and %d asked for", i, j)
			return l, nvml.SUCCESS
		}
	}

	devs, err := Discover(s)
	require.NoError(t, err)
	require.Len(t, devs, 4)
	for _, d := range devs {
		assert.Equal(t, -1, d.NUMANode)
		assert.Nil(t, d.CPUAffinity)
	}
	assert.Equal(t, []Link{
		{Peer: 1, Kind: KindNVLink, NVLinks: 4},
		{Peer: 2, Kind: KindPCIe, Level: LevelHostBridge},
		{Peer: 3, Kind: KindPCIe, Level: LevelNode},
	}, devs[0].Links)
	assert.Equal(t, []Link{
		{Peer: 0, Kind: KindNVLink, NVLinks: 4},
		{Peer: 2, Kind: KindPCIe, Level: LevelSystem},
		{Peer: 3, Kind: KindPCIe, Level: LevelMultiple},
	}, devs[1].Links)
	assert.Equal(t, []Link{
		{Peer: 0, Kind: KindPCIe, Level: LevelHostBridge},
		{Peer: 1, Kind: KindPCIe, Level: LevelSystem},
		{Peer: 3, Kind: KindNVLink, NVLinks: 2},
	}, devs[2].Links)
	assert.Equal(t, []Link{
		{Peer: 0, Kind: KindPCIe, Level: LevelNode},
		{Peer: 1, Kind: KindPCIe, Level: LevelMultiple},
		{Peer: 2, Kind: KindNVLink, NVLinks: 2},
	}, devs[3].Links)
	assert.Equal(t, ""+
		"      GPU0  GPU1  GPU2  GPU3  CPU Affinity  NUMA Affinity\n"+
		"GPU0  X     NV4   PHB   NODE  N/A           N/A\n"+
		"GPU1  NV4   X     SYS   PXB   N/A           N/A\n"+
		"GPU2  PHB   SYS   X     NV2   N/A           N/A\n"+
		"GPU3  NODE  PXB   NV2   X     N/A           N/A\n"+
		"\n"+
		"Legend:\n"+
		"  X    = self\n"+
		"  NV#  = a bonded set of # NVLinks\n"+
		"  PXB  = PCIe, through several PCIe bridges, no host bridge\n"+
		"  PHB  = PCIe, through a PCIe host bridge (typically the CPU)\n"+
		"  NODE = PCIe and the interconnect between the host bridges of a NUMA node\n"+
		"  SYS  = PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)\n", Matrix(devs))
}

// A GPU without NVLink (every link not supported) and whose optional
// queries are all not supported: the fields are unknown, the discovery
// succeeds.
func TestDiscoverNotSupported(t *testing.T) {
	s := dgxh100.NewWithGPUs(gpus.H100_SXM5_80GB)
	d := mockGPUs(t, s)[0]
	d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED }
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return nil, nvml.ERROR_FUNCTION_NOT_FOUND }
	d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }

	devs, err := Discover(s)
	require.NoError(t, err)
	assert.Equal(t, []Device{{Index: 0, Name: gpus.H100_SXM5_80GB.Name, UUID: d.UUID, MemoryTotal: -1, MemoryFree: -1, NUMANode: -1}}, devs)
	assert.Len(t, d.GetNvLinkStateCalls(), nvml.NVLINK_MAX_LINKS)
	assert.Equal(t, "NVIDIA H100 80GB HBM3, memory unknown total, unknown free", devs[0].Summary())
}

// NVML that cannot be initialised: unavailable, with the reason, and no
// further call (the mock has nothing else set: another call would panic).
func TestDiscoverInitFails(t *testing.T) {
	for ret, why := range map[nvml.Return]string{
		nvml.ERROR_LIBRARY_NOT_FOUND:       "libnvidia-ml.so.1 not found",
		nvml.ERROR_DRIVER_NOT_LOADED:       "kernel driver is not loaded",
		nvml.ERROR_LIB_RM_VERSION_MISMATCH: "different versions",
		nvml.ERROR_UNKNOWN:                 "",
	} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
		devs, err := Discover(lib)
		assert.Nil(t, devs)
		require.Error(t, err)
		assert.ErrorIs(t, err, xerr.ErrUnavailable)
		assert.ErrorIs(t, err, ret)
		assert.Contains(t, err.Error(), "cuda nvml discover: nvmlInit: "+ret.Error())
		assert.Contains(t, err.Error(), why)
		assert.NotContains(t, err.Error(), "\n")
	}
}

// A failure after Init: the GPU and the call are named, NVML is shut down,
// a lost GPU is a lost device, another failure of an optional query is an
// error too.
func TestDiscoverFails(t *testing.T) {
	s := dgxh100.New()
	mgs := dgxs[0].complete(t, s)
	mgs[3].GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	devs, err := Discover(s)
	assert.Nil(t, devs)
	assert.ErrorIs(t, err, xerr.ErrDeviceLost)
	assert.ErrorIs(t, err, nvml.ERROR_GPU_IS_LOST)
	assert.EqualError(t, err, "cuda nvml discover: GPU 3: nvmlDeviceGetUUID: ERROR_GPU_IS_LOST: device lost")
	assert.Len(t, s.ShutdownCalls(), 1)

	s = dgxh100.New()
	mgs = dgxs[0].complete(t, s)
	mgs[0].GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NO_PERMISSION }
	_, err = Discover(s)
	assert.ErrorIs(t, err, xerr.ErrUnavailable)
	assert.EqualError(t, err, "cuda nvml discover: GPU 0: nvmlDeviceGetMemoryInfo: ERROR_NO_PERMISSION: backend unavailable")
	assert.Len(t, s.ShutdownCalls(), 1)

	s = dgxh100.New()
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	_, err = Discover(s)
	assert.EqualError(t, err, "cuda nvml discover: nvmlDeviceGetCount: ERROR_UNKNOWN: backend unavailable")
}

// On a machine without the NVIDIA driver, Open says so; with one, the
// discovery of the real GPUs succeeds.
func TestOpen(t *testing.T) {
	lib, err := Open()
	if err != nil {
		assert.ErrorIs(t, err, xerr.ErrUnavailable)
		assert.Contains(t, err.Error(), "cuda nvml open: no NVIDIA driver library: ")
		assert.Contains(t, err.Error(), LibraryName)
		assert.Nil(t, lib)
		_, err2 := DiscoverLocal()
		assert.Equal(t, err.Error(), err2.Error())
		t.Logf("no NVML here: %v", err)
		return
	}
	devs, err := Discover(lib)
	if errors.Is(err, xerr.ErrUnavailable) {
		t.Skipf("NVML present but unusable: %v", err)
	}
	require.NoError(t, err)
	for _, d := range devs {
		t.Logf("GPU %d: %s; %s", d.Index, d.Summary(), d.XPU().Details())
		assert.NotEmpty(t, d.Name)
		assert.NotEmpty(t, d.UUID)
	}
	t.Logf("\n%s", Matrix(devs))
}
