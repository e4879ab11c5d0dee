package conformance_test

import (
	"context"
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

// The fake drivers of the suite's own tests.
const (
	honestDriver      = "conformance-test-honest"
	overclaimDriver   = "conformance-test-overclaims"
	underclaimDriver  = "conformance-test-underclaims"
	unavailableDriver = "conformance-test-unavailable"
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
