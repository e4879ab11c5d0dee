// Package topo discovers the NVIDIA GPUs of a machine and how they are
// connected, through NVML (the NVIDIA Management Library the driver ships
// as libnvidia-ml.so.1), by way of github.com/NVIDIA/go-nvml.
//
// Discover reads, for every GPU NVML enumerates, its name, UUID, CUDA
// compute capability, memory, PCI address, NUMA node and CPU affinity, and
// the path to every other GPU: the number of NVLinks joining the two
// (directly or through NVSwitches), or else how far up the PCIe hierarchy
// their nearest common ancestor is. It takes any nvml.Interface, the
// system's (Open) or a mock one, such as go-nvml's mock DGX machines the
// tests use. DiscoverLocal does both on this machine.
//
// go-nvml is a cgo package: without cgo, Open and Discover do not exist and
// DiscoverLocal returns an error matching xerr.ErrUnavailable. The types,
// Summary and Matrix exist either way.
//
// A Device converts to the project's xpu.Device (Device.XPU), whose
// formatting — xpu.Device.Summary and xpu.TopologyMatrix, which `xpu info`
// prints — Summary and Matrix use.
package topo
