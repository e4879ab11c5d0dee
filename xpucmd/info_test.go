package xpucmd

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
)

// gpuBox is a driver that opens nothing and describes three GPUs with
// the optional fields of xpu.Device: GPUs 0 and 1 joined by four NVLinks,
// GPU 2 on the other socket, and of which less is known.
type gpuBox struct{ unopenable } // Open fails as unopenable's

func intPtr(n int) *int { return &n }

func (gpuBox) Info(context.Context) xpu.Info {
	return xpu.Info{Available: true, Devices: []xpu.Device{
		{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryTotal: 80 << 30, MemoryFree: 79 << 30,
			UUID: "GPU-00000000-0000-0000-0000-000000000000", ComputeCapability: "9.0", PCIBusID: "0000:18:00.0",
			NUMANode: intPtr(0), CPUAffinity: []int{0, 1, 2, 3},
			Links: []xpu.Link{{Peer: 1, Kind: "nvlink", NVLinks: 4}, {Peer: 2, Kind: "pcie", Level: "system"}}},
		{Index: 1, Name: "NVIDIA H100 80GB HBM3", MemoryTotal: 80 << 30, MemoryFree: 79 << 30,
			UUID: "GPU-11111111-1111-1111-1111-111111111111", ComputeCapability: "9.0", PCIBusID: "0000:2a:00.0",
			NUMANode: intPtr(0), CPUAffinity: []int{0, 1, 2, 3},
			Links: []xpu.Link{{Peer: 0, Kind: "nvlink", NVLinks: 4}, {Peer: 2, Kind: "pcie", Level: "system"}}},
		{Index: 2, Name: "NVIDIA H100 80GB HBM3", MemoryTotal: 80 << 30, MemoryFree: -1, NUMANode: intPtr(1),
			Links: []xpu.Link{{Peer: 0, Kind: "pcie", Level: "system"}, {Peer: 1, Kind: "pcie", Level: "system"}}},
	}}
}

func init() {
	xpu.Register("xpucmd-test-gpus", gpuBox{})
	xpu.RegisterAlias("xpucmd-test-gpus-old", "xpucmd-test-gpus")
}

// section returns the part of info's table output about backend name.
func section(t *testing.T, out, name string) string {
	t.Helper()
	_, s, ok := strings.Cut(out, "\n"+name+":\n")
	require.True(t, ok, "no section %s in\n%s", name, out)
	// It ends at a blank line before an unindented one: the next
	// backend's section, or the selection chain.
	if loc := regexp.MustCompile(`\n\n\S`).FindStringIndex(s); loc != nil {
		s = s[:loc[0]+1]
	}
	return s
}

// The optional device fields: a second line per device that has some, and
// the topology matrix of the backend whose devices have links.
func TestInfoDeviceDetails(t *testing.T) {
	var stdout, stderr strings.Builder
	require.Equal(t, 0, Run(testCtx(t), []string{"info"}, &stdout, &stderr), stderr.String())
	assert.Equal(t, ""+
		"  also named: xpucmd-test-gpus-old\n"+
		"  device 0: NVIDIA H100 80GB HBM3, memory 80.0 GiB total, 79.0 GiB free, compute capability 9.0, PCI 0000:18:00.0, NUMA node 0\n"+
		"    UUID GPU-00000000-0000-0000-0000-000000000000, CPUs 0-3\n"+
		"  device 1: NVIDIA H100 80GB HBM3, memory 80.0 GiB total, 79.0 GiB free, compute capability 9.0, PCI 0000:2a:00.0, NUMA node 0\n"+
		"    UUID GPU-11111111-1111-1111-1111-111111111111, CPUs 0-3\n"+
		"  device 2: NVIDIA H100 80GB HBM3, memory 80.0 GiB total, unknown free, NUMA node 1\n"+
		"  topology:\n"+
		"          GPU0  GPU1  GPU2  CPU Affinity  NUMA Affinity\n"+
		"    GPU0  X     NV4   SYS   0-3           0\n"+
		"    GPU1  NV4   X     SYS   0-3           0\n"+
		"    GPU2  SYS   SYS   X     N/A           1\n"+
		"\n"+
		"    Legend:\n"+
		"      X    = self\n"+
		"      NV#  = a bonded set of # NVLinks\n"+
		"      SYS  = PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)\n",
		section(t, stdout.String(), "xpucmd-test-gpus"))

	// A backend whose devices have none of the optional fields prints as
	// it did: one line per device, no matrix.
	cpu := section(t, stdout.String(), "cpu")
	assert.Regexp(t, `^  device 0: .*, memory .* total, .* free\n  element types: `, cpu)
	assert.NotContains(t, cpu, "topology")
}

func TestInfoJSONDeviceDetails(t *testing.T) {
	var stdout, stderr strings.Builder
	require.Equal(t, 0, Run(testCtx(t), []string{"info", "--json"}, &stdout, &stderr), stderr.String())
	var out struct {
		Backends []struct {
			Name    string            `json:"name"`
			Devices []json.RawMessage `json:"devices"`
		} `json:"backends"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &out))
	devices := map[string][]json.RawMessage{}
	for _, b := range out.Backends {
		devices[b.Name] = b.Devices
	}

	gpus := devices["xpucmd-test-gpus"]
	require.Len(t, gpus, 3)
	assert.JSONEq(t, `{"index":0,"name":"NVIDIA H100 80GB HBM3","memory_total":85899345920,"memory_free":84825604096,
		"uuid":"GPU-00000000-0000-0000-0000-000000000000","compute_capability":"9.0","pci_bus_id":"0000:18:00.0",
		"numa_node":0,"cpu_affinity":[0,1,2,3],
		"links":[{"peer":1,"kind":"nvlink","nvlinks":4},{"peer":2,"kind":"pcie","level":"system"}]}`, string(gpus[0]))
	assert.JSONEq(t, `{"index":2,"name":"NVIDIA H100 80GB HBM3","memory_total":85899345920,"memory_free":-1,"numa_node":1,
		"links":[{"peer":0,"kind":"pcie","level":"system"},{"peer":1,"kind":"pcie","level":"system"}]}`, string(gpus[2]))
	var back xpu.Device
	require.NoError(t, json.Unmarshal(gpus[1], &back))
	assert.Equal(t, gpuBox{}.Info(t.Context()).Devices[1], back)

	// The CPU backend's device has the fields it always had, and no more.
	require.Len(t, devices["cpu"], 1)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(devices["cpu"][0], &keys))
	assert.ElementsMatch(t, []string{"index", "name", "memory_total", "memory_free"}, mapKeys(keys))
}

func mapKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// downBox is a driver that says it is unavailable.
type downBox struct{ unopenable }

func (downBox) Info(context.Context) xpu.Info { return xpu.Info{Reason: "no such device"} }

func init() { xpu.Register("xpucmd-test-down", downBox{}) }

// The chain OpenDefault would try, why, and what becomes of each
// candidate, up to the first available: the last lines of info.
func TestInfoSelection(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"xpucmd-test-down, cuda ,cpu,xpucmd-test-gpus", "\n" +
			"selection chain of OpenDefault: xpucmd-test-down -> cuda -> cpu -> xpucmd-test-gpus (from XPU_BACKEND)\n" +
			"  xpucmd-test-down: skipped: unavailable: no such device\n" +
			`  cuda: skipped: xpu describe: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"` + "\n" +
			"  cpu: chosen, the first available\n" +
			"transfer paths: "},
		{"cdua,cpu", "\n" +
			`selection chain of OpenDefault: none: XPU_BACKEND="cdua,cpu": unknown backend "cdua" (did you mean cuda?); known: ` +
			"cpu, cuda, local, mpi, procs, rdma, tcp, xpucmd-test-down, xpucmd-test-forgetful, xpucmd-test-gpus, xpucmd-test-gpus-old, xpucmd-test-unopenable\n" +
			"transfer paths: "},
	} {
		t.Setenv(xpu.EnvBackend, c.env)
		var stdout, stderr strings.Builder
		require.Equal(t, 0, Run(testCtx(t), []string{"info"}, &stdout, &stderr), stderr.String())
		out := stdout.String()
		i := strings.LastIndex(out, "\nselection chain")
		require.GreaterOrEqual(t, i, 0, out)
		j := strings.LastIndex(out, "transfer paths: ")
		require.Greater(t, j, i, out)
		assert.Equal(t, c.want, out[i:j+len("transfer paths: ")])

		stdout.Reset()
		require.Equal(t, 0, Run(testCtx(t), []string{"info", "--json"}, &stdout, &stderr), stderr.String())
		var js struct {
			Chain    []string `json:"chain"`
			ChainWhy string   `json:"chain_why"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout.String()), &js))
		assert.Equal(t, xpu.Chain(), js.Chain)
		plan, err := xpu.PlanDefault()
		if err != nil {
			assert.Equal(t, err.Error(), js.ChainWhy)
		} else {
			assert.Equal(t, "from XPU_BACKEND", js.ChainWhy)
			assert.Equal(t, plan.Chain, js.Chain)
		}
	}
}
