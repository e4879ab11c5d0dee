package xpu

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Summary describes the device on one line: its name, its memory and,
// when known, its compute capability, PCI address and NUMA node
// ("NVIDIA H100 80GB HBM3, memory 80.0 GiB total, 79.2 GiB free, compute
// capability 9.0, PCI 0000:18:00.0, NUMA node 0"). The index, the UUID,
// the CPU affinity and the links are left to the caller (Details,
// TopologyMatrix).
func (d Device) Summary() string {
	var b strings.Builder
	if d.Transport != "" {
		// A network device: no memory of its own to speak of.
		fmt.Fprintf(&b, "%s, %s", d.Name, d.Transport)
		if d.MaxRegion > 0 {
			b.WriteString(", largest memory region " + memString(int64(min(d.MaxRegion, 1<<62))))
		}
		if d.PCIBusID != "" {
			b.WriteString(", PCI " + d.PCIBusID)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%s, memory %s total, %s free", d.Name, memString(d.MemoryTotal), memString(d.MemoryFree))
	if d.ComputeCapability != "" {
		b.WriteString(", compute capability " + d.ComputeCapability)
	}
	if d.PCIBusID != "" {
		b.WriteString(", PCI " + d.PCIBusID)
	}
	if d.NUMANode != nil {
		b.WriteString(", NUMA node " + strconv.Itoa(*d.NUMANode))
	}
	return b.String()
}

// Details describes on one line what Summary leaves out of the optional
// fields but the links: the UUID and the CPU affinity ("UUID GPU-8f6c…,
// CPUs 0-55,112-167"). It is empty when neither is known.
func (d Device) Details() string {
	var parts []string
	if d.UUID != "" {
		parts = append(parts, "UUID "+d.UUID)
	}
	if len(d.CPUAffinity) > 0 {
		parts = append(parts, "CPUs "+cpuList(d.CPUAffinity))
	}
	return strings.Join(parts, ", ")
}

// TopologyMatrix writes the links between devs as a matrix in the manner
// of `nvidia-smi topo -m`: a row and a column per device (GPU0, GPU1, …,
// named by Index), each cell the path from the row's device to the
// column's — X for itself, NV# for # bonded NVLinks, INT, PIX, PXB, PHB,
// NODE or SYS for a PCIe path of level internal, single, multiple,
// hostbridge, node or system, N/A when unknown — then the CPU and NUMA
// affinity of the row's device, and a legend of the codes used. It
// returns "" for no device.
func TopologyMatrix(devs []Device) string {
	if len(devs) == 0 {
		return ""
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, d := range devs {
		fmt.Fprintf(tw, "\tGPU%d", d.Index)
	}
	fmt.Fprint(tw, "\tCPU Affinity\tNUMA Affinity\n")
	used := map[string]bool{}
	for _, d := range devs {
		fmt.Fprintf(tw, "GPU%d", d.Index)
		for _, p := range devs {
			c := linkCode(d, p.Index)
			used[legendKey(c)] = true
			fmt.Fprintf(tw, "\t%s", c)
		}
		cpus, numa := "N/A", "N/A"
		if len(d.CPUAffinity) > 0 {
			cpus = cpuList(d.CPUAffinity)
		}
		if d.NUMANode != nil {
			numa = strconv.Itoa(*d.NUMANode)
		}
		fmt.Fprintf(tw, "\t%s\t%s\n", cpus, numa)
	}
	_ = tw.Flush() // a strings.Builder does not fail
	b.WriteString("\nLegend:\n")
	for _, l := range legend {
		if used[l.code] {
			fmt.Fprintf(&b, "  %-4s = %s\n", l.code, l.meaning)
		}
	}
	return b.String()
}

// legend lists the codes of TopologyMatrix's cells, in the order printed.
var legend = []struct{ code, meaning string }{
	{"X", "self"},
	{"NV#", "a bonded set of # NVLinks"},
	{"INT", "PCIe, within one board"},
	{"PIX", "PCIe, through at most one PCIe bridge"},
	{"PXB", "PCIe, through several PCIe bridges, no host bridge"},
	{"PHB", "PCIe, through a PCIe host bridge (typically the CPU)"},
	{"NODE", "PCIe and the interconnect between the host bridges of a NUMA node"},
	{"SYS", "PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)"},
	{"N/A", "unknown"},
}

// pcieCodes are the matrix codes of the PCIe levels of Link.Level.
var pcieCodes = map[string]string{
	"internal":   "INT",
	"single":     "PIX",
	"multiple":   "PXB",
	"hostbridge": "PHB",
	"node":       "NODE",
	"system":     "SYS",
}

// linkCode is the matrix cell for the path from d to the device of index
// peer.
func linkCode(d Device, peer int) string {
	if peer == d.Index {
		return "X"
	}
	for _, l := range d.Links {
		if l.Peer != peer {
			continue
		}
		switch l.Kind {
		case "nvlink":
			return "NV" + strconv.Itoa(l.NVLinks)
		case "pcie":
			if c, ok := pcieCodes[l.Level]; ok {
				return c
			}
		}
		return "N/A"
	}
	return "N/A"
}

// legendKey is the legend entry that explains cell code c.
func legendKey(c string) string {
	if strings.HasPrefix(c, "NV") {
		return "NV#"
	}
	return c
}

// cpuList writes increasing CPU numbers as ranges: "0-55,112-167".
func cpuList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// memString writes a byte count in units of 1024 with one decimal
// ("80.0 GiB"), or "unknown" for a negative count.
func memString(n int64) string {
	if n < 0 {
		return "unknown"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// String describes the port on one line ("port 1: ACTIVE, Ethernet, MTU
// 1024, dummy0 192.0.2.1, GIDs fe80::…, ::ffff:192.0.2.1").
func (p Port) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "port %d: %s, %s, MTU %d", p.Num, p.State, p.LinkLayer, p.MTU)
	if p.Speed != "" {
		b.WriteString(", " + p.Speed)
	}
	if p.Netdev != "" || p.Addr != "" {
		b.WriteString(", " + strings.TrimSpace(p.Netdev+" "+p.Addr))
	}
	if len(p.GIDs) > 0 {
		b.WriteString(", GIDs " + strings.Join(p.GIDs, ", "))
	}
	return b.String()
}
