package cuda

import (
	"sync"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda/internal/topo"
)

var (
	nvmlOnce sync.Once
	nvmlDevs []topo.Device
)

// enrich adds what NVML knows of the devices — UUID, NUMA node, CPU
// affinity, the links between devices — matching NVML's devices to the
// driver's by PCI address. Without NVML the devices stay as the driver
// describes them. NVML is asked once per process.
func enrich(devs []xpu.Device) {
	nvmlOnce.Do(func() { nvmlDevs, _ = topo.DiscoverLocal() })
	byBus := map[string]int{} // NVML index -> our index
	for i, d := range devs {
		byBus[topo.NormalizeBusID(d.PCIBusID)] = i
	}
	for _, nd := range nvmlDevs {
		i, ok := byBus[topo.NormalizeBusID(nd.PCIBusID)]
		if !ok {
			continue
		}
		x := nd.XPU()
		d := &devs[i]
		if x.UUID != "" {
			d.UUID = x.UUID
		}
		d.NUMANode, d.CPUAffinity = x.NUMANode, x.CPUAffinity
		for _, l := range x.Links {
			peer := -1
			for _, other := range nvmlDevs {
				if other.Index == l.Peer {
					if j, ok := byBus[topo.NormalizeBusID(other.PCIBusID)]; ok {
						peer = j
					}
				}
			}
			if peer >= 0 {
				l.Peer = peer
				d.Links = append(d.Links, l)
			}
		}
	}
}
