package conformance_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/memspace"
)

// fakeDriver opens a backend whose memory is a correct fakeSpace (a
// memspace.StatsSpace and nothing more) and, with group, that makes groups
// of local ranks. Its Info lists caps, true or not.
type fakeDriver struct {
	caps        []string
	group       bool
	unavailable string // the reason, when not available
}

func (d fakeDriver) Open(ctx context.Context, _ xpu.Options) (*xpu.Backend, error) {
	sp := newFakeSpace(correct)
	b := &xpu.Backend{Memory: sp, Spaces: []memspace.Space{sp}}
	if d.group {
		b.Group = func(ctx context.Context, n int) ([]comm.Comm, error) {
			return localGroup(n, local.Options{}, nil)
		}
	}
	return b, nil
}

func (d fakeDriver) Info(context.Context) xpu.Info {
	return xpu.Info{Available: d.unavailable == "", Reason: d.unavailable, Capabilities: d.caps}
}

// devicesDriver opens a backend of one of two fake devices, chosen with
// conformance.DeviceOption: its memory is a device fakeSpace that says it
// is on that device and draws on the device's memory, 64 MiB each. A
// confused driver draws on device 0's memory whichever device it opens,
// as a backend that opens device 1 with device 0's handle does; a
// mislabelled one has its spaces say they are on device 0.
type devicesDriver struct {
	confused, mislabelled bool
	mem                   [2]*memAccount
}

func newDevicesDriver(confused, mislabelled bool) *devicesDriver {
	return &devicesDriver{confused: confused, mislabelled: mislabelled,
		mem: [2]*memAccount{{capacity: 64 << 20}, {capacity: 64 << 20}}}
}

func (d *devicesDriver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	idx := 0
	if v, ok := opts[conformance.DeviceOption]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= len(d.mem) {
			return nil, fmt.Errorf("fake devices: device %q: %w", v, xpu.ErrInvalidArgument)
		}
		idx = n
	}
	sp := newFakeDevice()
	sp.index, sp.acct = idx, d.mem[idx]
	if d.confused {
		sp.acct = d.mem[0]
	}
	if d.mislabelled {
		sp.index = 0
	}
	return &xpu.Backend{Memory: sp, Spaces: []memspace.Space{sp}}, nil
}

func (d *devicesDriver) Info(context.Context) xpu.Info {
	info := xpu.Info{Available: true, Capabilities: xpu.CapabilitiesOf((*fakeSpace)(nil))}
	for i, m := range d.mem {
		info.Devices = append(info.Devices, xpu.Device{Index: i, Name: "fake device", MemoryTotal: m.capacity, MemoryFree: -1})
	}
	return info
}

// The fake drivers of the suite's own tests.
const (
	devicesDriverName  = "conformance-test-devices"
	confusedDriverName = "conformance-test-confused-devices"
	mislabelDriverName = "conformance-test-mislabelled-devices"
	honestDriver       = "conformance-test-honest"
	overclaimDriver    = "conformance-test-overclaims"
	underclaimDriver   = "conformance-test-underclaims"
	unavailableDriver  = "conformance-test-unavailable"
)

func init() {
	// Derived from its types, as a driver's Info should be, with a
	// behaviour capability besides.
	xpu.Register(honestDriver, fakeDriver{group: true,
		caps: append(xpu.CapabilitiesOf((*fakeSpace)(nil), (*local.Comm)(nil)), xpu.CapGroup, xpu.CapAnySource)})
	// Lists what it does not implement: a lookup its space lacks, streams
	// without an executor, groups it does not make, and memory.stats twice.
	xpu.Register(overclaimDriver, fakeDriver{caps: []string{xpu.CapMemoryStats, xpu.CapMemoryLookup,
		xpu.CapMemoryStats, xpu.CapStreams, xpu.CapGroup}})
	// Implements what it does not list: its space's ledger, its ranks'
	// point-to-point messages, its groups.
	xpu.Register(underclaimDriver, fakeDriver{group: true})
	xpu.Register(unavailableDriver, fakeDriver{unavailable: "no fake device here"})
	xpu.Register(devicesDriverName, newDevicesDriver(false, false))
	xpu.Register(confusedDriverName, newDevicesDriver(true, false))
	xpu.Register(mislabelDriverName, newDevicesDriver(false, true))
}

// TestDevices: a backend of two devices whose spaces are each device's own
// passes backend/devices.
func TestDevices(t *testing.T) {
	conformance.RunDriver(t, devicesDriverName, xpu.Options{conformance.DeviceOption: "1"})
}

// TestBrokenDevicesConfused: a backend opened for device 1 that allocates
// device 0's memory fails backend/devices, though its space says device 1.
func TestBrokenDevicesConfused(t *testing.T) {
	onlyInChild(t)
	conformance.RunDriver(t, confusedDriverName, nil)
}

// TestBrokenDevicesMislabelled: a backend opened for device 1 whose
// memory says it is on device 0 fails backend/devices.
func TestBrokenDevicesMislabelled(t *testing.T) {
	onlyInChild(t)
	conformance.RunDriver(t, mislabelDriverName, nil)
}

// TestHonestDriver passes backend/capabilities (run in a child process,
// which runs that case alone).
func TestHonestDriver(t *testing.T) {
	onlyInChild(t)
	conformance.RunDriver(t, honestDriver, nil)
}

func TestBrokenCapabilitiesListed(t *testing.T) {
	onlyInChild(t)
	conformance.RunDriver(t, overclaimDriver, nil)
}

func TestBrokenCapabilitiesUnlisted(t *testing.T) {
	onlyInChild(t)
	conformance.RunDriver(t, underclaimDriver, nil)
}

func TestBrokenUnknownDriver(t *testing.T) {
	onlyInChild(t)
	conformance.RunDriver(t, "conformance-test-no-such-driver", nil)
}

// TestRunChecksInfo: Run checks the Info of the driver registered under
// the backend's name, as RunDriver does.
func TestRunChecksInfo(t *testing.T) {
	onlyInChild(t)
	conformance.Run(t, openBackend(overclaimDriver, nil))
}

// RunDriver skips a backend its driver says is unavailable, with the
// reason.
func TestRunDriverUnavailable(t *testing.T) {
	var sub *testing.T
	t.Run("unavailable", func(t *testing.T) {
		sub = t
		conformance.RunDriver(t, unavailableDriver, nil)
		t.Error("RunDriver ran an unavailable backend")
	})
	assert.True(t, sub.Skipped())
}
