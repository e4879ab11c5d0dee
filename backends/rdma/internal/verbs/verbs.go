//go:build rdma && cgo

package verbs

/*
#cgo LDFLAGS: -libverbs -lrdmacm
#include <stdlib.h>
#include "xverbs.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
)

// Built reports whether the package was built with rdma-core (-tags rdma
// and cgo).
const Built = true

// Provider returns the provider of the kernel's RDMA devices.
func Provider() fabric.Provider { return provider{} }

type provider struct{}

var _ fabric.Provider = provider{}

// Devices lists the devices libibverbs finds, with their ports and GIDs.
// A device that cannot be opened or queried is left out; the error says
// why only when that leaves none.
func (provider) Devices() ([]fabric.DeviceInfo, error) {
	var n C.int
	list, errno := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, fmt.Errorf("verbs: ibv_get_device_list: %w: %w", errnoErr(errno), ErrNoDevice)
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))
	out := make([]fabric.DeviceInfo, 0, len(devs))
	var errs []error
	for _, d := range devs {
		ctx, errno := C.ibv_open_device(d)
		if ctx == nil {
			errs = append(errs, fmt.Errorf("verbs: ibv_open_device %s: %w", C.GoString(C.ibv_get_device_name(d)), errnoErr(errno)))
			continue
		}
		info, _, err := describe(ctx)
		C.ibv_close_device(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, info)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// devAttr is what a Context keeps of ibv_device_attr.
type devAttr struct {
	maxRdAtom     int // max_qp_rd_atom: RDMA READs a queue pair answers at once
	maxInitRdAtom int // max_qp_init_rd_atom: RDMA READs it has outstanding
}

// describe queries an opened device.
func describe(ctx *C.struct_ibv_context) (fabric.DeviceInfo, devAttr, error) {
	dev := ctx.device
	name := C.GoString(C.ibv_get_device_name(dev))
	var attr C.struct_ibv_device_attr
	if rc := C.ibv_query_device(ctx, &attr); rc != 0 {
		return fabric.DeviceInfo{}, devAttr{}, fmt.Errorf("verbs: ibv_query_device %s: %w", name, syscall.Errno(rc))
	}
	info := fabric.DeviceInfo{
		Name:      name,
		NodeGUID:  formatGUID(uint64(C.xv_node_guid(dev))),
		FWVersion: C.GoString(&attr.fw_ver[0]),
		MaxMRSize: uint64(attr.max_mr_size),
		MaxQP:     int(attr.max_qp),
		MaxCQE:    int(attr.max_cqe),
		MaxSGE:    int(attr.max_sge),
	}
	da := devAttr{maxRdAtom: int(attr.max_qp_rd_atom), maxInitRdAtom: int(attr.max_qp_init_rd_atom)}
	for p := 1; p <= int(attr.phys_port_cnt); p++ {
		var pa C.xv_port
		if rc := C.xv_query_port(ctx, C.int(p), &pa); rc != 0 {
			return fabric.DeviceInfo{}, devAttr{}, fmt.Errorf("verbs: ibv_query_port %s/%d: %w", name, p, syscall.Errno(rc))
		}
		info.Ports = append(info.Ports, describePort(ctx, name, p, &pa))
	}
	switch {
	case dev.transport_type == C.IBV_TRANSPORT_IWARP:
		info.Transport = "iWARP"
	case len(info.Ports) > 0 && info.Ports[0].LinkLayer == "Ethernet":
		info.Transport = "RoCE"
	case dev.transport_type == C.IBV_TRANSPORT_IB:
		info.Transport = "InfiniBand"
	default:
		info.Transport = "unknown"
	}
	return info, da, nil
}

// maxGIDs bounds the GIDs listed per port.
const maxGIDs = 256

func describePort(ctx *C.struct_ibv_context, dev string, num int, pa *C.xv_port) fabric.PortInfo {
	pi := fabric.PortInfo{
		Num:       num,
		State:     portState(int(pa.state)),
		LinkLayer: linkLayer(int(pa.link_layer)),
		MTU:       mtuBytes(int(pa.active_mtu)),
		Speed:     portSpeed(int(pa.active_speed), int(pa.active_width)),
	}
	var raw [maxGIDs * 16]C.uint8_t
	var idx [maxGIDs]C.int32_t
	n := int(C.xv_query_gids(ctx, C.int(num), pa.gid_tbl_len, &raw[0], &idx[0], maxGIDs))
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		var g [16]byte
		for j := range g {
			g[j] = byte(raw[16*i+j])
		}
		a := netip.AddrFrom16(g)
		s := a.String()
		if !seen[s] {
			seen[s] = true
			pi.GIDs = append(pi.GIDs, s)
		}
		if pi.Netdev == "" {
			pi.Netdev = gidNetdev(dev, num, int(idx[i]))
		}
		if pi.IPv4 == "" && a.Is4In6() {
			pi.IPv4 = a.Unmap().String()
		}
	}
	if pi.IPv4 == "" && pi.Netdev != "" {
		pi.IPv4 = netdevIPv4(pi.Netdev)
	}
	return pi
}

// gidNetdev reads the network interface a RoCE GID entry belongs to.
func gidNetdev(dev string, port, idx int) string {
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", dev, "ports", fmt.Sprint(port), "gid_attrs/ndevs", fmt.Sprint(idx)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// netdevIPv4 is the first IPv4 address of a network interface.
func netdevIPv4(name string) string {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return ""
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.To4().String()
		}
	}
	return ""
}

func formatGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

func portState(s int) string {
	switch s {
	case C.IBV_PORT_NOP:
		return "NOP"
	case C.IBV_PORT_DOWN:
		return "DOWN"
	case C.IBV_PORT_INIT:
		return "INIT"
	case C.IBV_PORT_ARMED:
		return "ARMED"
	case C.IBV_PORT_ACTIVE:
		return "ACTIVE"
	case C.IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER"
	}
	return fmt.Sprintf("state %d", s)
}

func linkLayer(l int) string {
	switch l {
	case C.IBV_LINK_LAYER_ETHERNET:
		return "Ethernet"
	case C.IBV_LINK_LAYER_INFINIBAND, C.IBV_LINK_LAYER_UNSPECIFIED:
		// Unspecified is what old kernels report for InfiniBand.
		return "InfiniBand"
	}
	return fmt.Sprintf("link layer %d", l)
}

// mtuBytes converts enum ibv_mtu (1: 256 … 5: 4096).
func mtuBytes(m int) int {
	if m < 1 || m > 5 {
		return 0
	}
	return 128 << m
}

// portSpeed is lanes × per-lane rate from the encoded active width and
// speed of ibv_port_attr, "" when either is unknown.
func portSpeed(speed, width int) string {
	lanes := map[int]float64{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}[width]
	rate := map[int]float64{1: 2.5, 2: 5, 4: 10, 8: 10, 16: 14, 32: 25, 64: 50, 128: 100, 256: 200}[speed]
	if lanes == 0 || rate == 0 {
		return ""
	}
	return fmt.Sprintf("%g Gb/s", lanes*rate)
}

// errnoErr turns the errno cgo returned beside a failed call into an
// error, with a fallback for a call that failed without setting errno.
func errnoErr(err error) error {
	if err == nil {
		return syscall.EIO
	}
	return err
}
