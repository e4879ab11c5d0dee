package conformance

import (
	"errors"
	"maps"
	"strconv"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/memspace"
)

// DeviceOption is the Open option that selects a device of a backend whose
// Info lists several: its value is a device's Index ("0", "1", …). A
// driver whose memory lies on one of several devices takes it; the case
// "backend/devices" opens each device with it.
const DeviceOption = "device"

// maxDevices bounds the devices "backend/devices" opens: pairs of four
// devices catch a backend that confuses them as well as eight would.
const maxDevices = 4

// identityBytes is the most the identity case allocates on a device: far
// above any allocation granularity, so the free memory of the device it
// lands on falls by at least that much and no other device's by half as
// much, even under a driver that rounds.
const identityBytes = 16 << 20

// deviceOpener opens the backend of one device, by the driver's name and
// DeviceOption.
type deviceOpener struct {
	name    string
	options xpu.Options // the run's own, to which the device is added
}

// open opens device index. The backend is closed when the case ends.
func (o deviceOpener) open(c *tcase, index int) *xpu.Backend {
	opts := maps.Clone(o.options)
	if opts == nil {
		opts = xpu.Options{}
	}
	opts[DeviceOption] = strconv.Itoa(index)
	b, err := xpu.Open(c.ctx, o.name, opts)
	if err != nil {
		c.Fatalf("conformance: open %s with %s=%d (the device the driver's Info lists): %v", o.name, DeviceOption, index, err)
	}
	c.Cleanup(func() {
		if err := b.Close(); err != nil && !errors.Is(err, xpu.ErrClosed) {
			c.Errorf("conformance: close %s device %d: %v", o.name, index, err)
		}
	})
	return b
}

// checkDevices is the case "backend/devices": a backend whose memory lies
// on a device, and whose driver lists several devices, opened for device
// i is device i's. Each of its spaces on a device says it is on device i
// (memspace.Properties.Device), and memory allocated from it is taken from
// device i: where its memory reports what is free (memspace.Availability),
// device i's free memory falls by at least the allocation and no other
// device's by half as much. A backend that opens device 1 with device 0's
// handle, or allocates through device 0's context, fails here.
//
// The case needs the devices to itself: another process allocating on
// them while it runs can make it fail.
func checkDevices(c *tcase, info xpu.Info, probe *xpu.Backend, o deviceOpener) {
	if len(info.Devices) < 2 {
		c.Skipf("the driver's Info lists %d device(s): the case needs two", len(info.Devices))
	}
	if probe.Memory == nil || probe.Memory.Properties().Device < 0 {
		c.Skip("the backend's memory is not on a device (memspace.Properties.Device is -1)")
	}
	devs := info.Devices[:min(len(info.Devices), maxDevices)]
	seen := map[int]bool{}
	backends := make([]*xpu.Backend, len(devs))
	for i, d := range devs {
		if seen[d.Index] {
			c.Fatalf("Info lists device index %d twice", d.Index)
		}
		seen[d.Index] = true
		b := o.open(c, d.Index)
		backends[i] = b
		if b.Memory == nil {
			c.Fatalf("the backend opened for device %d has no Memory", d.Index)
		}
		for _, sp := range spacesOf(b) {
			if got := sp.Properties().Device; got >= 0 && got != d.Index {
				c.Errorf("the backend opened with %s=%d has space %s on device %d (Properties().Device)",
					DeviceOption, d.Index, sp.Name(), got)
			}
		}
	}
	avail := make([]memspace.Availability, len(devs))
	for i, b := range backends {
		a, ok := memspace.As[memspace.Availability](b.Memory)
		if !ok {
			c.Logf("device %d's memory %s reports no free memory (memspace.Availability): checked by its properties only",
				devs[i].Index, b.Memory.Name())
			return
		}
		avail[i] = a
	}
	for i, d := range devs {
		checkAllocatedOn(c, devs, avail, i, backends[i].Memory)
		if c.Failed() {
			c.Logf("(device %d's allocation)", d.Index)
			return
		}
	}
}

// checkAllocatedOn allocates on devs[i] through sp and checks that the
// free memory of devs[i], and of no other device, falls.
func checkAllocatedOn(c *tcase, devs []xpu.Device, avail []memspace.Availability, i int, sp memspace.Space) {
	before := freeOf(c, devs, avail)
	if before == nil {
		return
	}
	size := int64(identityBytes)
	if before[i] >= 0 {
		size = min(size, before[i]/4)
	}
	size &^= 4095
	if size < 4096 {
		c.Skipf("device %d has %d bytes free: too little to see where memory is taken from", devs[i].Index, before[i])
	}
	blk, err := sp.Allocate(int(size), 0)
	if err != nil {
		c.Fatalf("allocate %d bytes of device %d's memory %s (%d free): %v", size, devs[i].Index, sp.Name(), before[i], err)
	}
	after := freeOf(c, devs, avail)
	if err := sp.Free(blk); err != nil {
		c.Errorf("free the %d bytes of device %d: %v", size, devs[i].Index, err)
	}
	if after == nil {
		return
	}
	for j, d := range devs {
		if before[j] < 0 || after[j] < 0 {
			continue
		}
		fell := before[j] - after[j]
		switch {
		case j == i && fell < size:
			c.Errorf("%d bytes allocated from the backend opened for device %d: that device's free memory fell by %d (from %d to %d); the memory was not taken from it",
				size, d.Index, fell, before[j], after[j])
		case j != i && fell >= size/2:
			c.Errorf("%d bytes allocated from the backend opened for device %d: device %d's free memory fell by %d (from %d to %d); the memory was taken from the wrong device",
				size, devs[i].Index, d.Index, fell, before[j], after[j])
		}
	}
}

// freeOf returns each device's free memory, -1 where unknown; nil (after
// failing the case) when one cannot say.
func freeOf(c *tcase, devs []xpu.Device, avail []memspace.Availability) []int64 {
	out := make([]int64, len(avail))
	for i, a := range avail {
		free, _, err := a.Available()
		if err != nil {
			c.Errorf("device %d's free memory: %v", devs[i].Index, err)
			return nil
		}
		out[i] = free
	}
	return out
}
