package xpu_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// Fakes that implement each optional interface of the concepts, by
// embedding it: their typed nil pointers answer type assertions as a
// driver's concrete types do, and no method is ever called.
type (
	p2pComm      struct{ comm.Comm }
	blockingComm struct {
		comm.Comm
		comm.Blocking
	}
	nativeComm struct {
		comm.Comm
		comm.Collectives
	}
	fullComm struct {
		comm.Notifier // a comm.OneSided and a comm.Comm too
		comm.Blocking
		comm.Collectives
	}
	// oneSidedComm is a communicator with one-sided transfers only.
	oneSidedComm struct{ comm.OneSided }
	// blockingOnly has blocking calls but is no communicator.
	blockingOnly struct{ comm.Blocking }

	plainExec    struct{ executor.Executor }
	parallelExec struct{ executor.Parallel }
	streamExec   struct {
		executor.Executor
		executor.Streamer
	}
	fullExec struct {
		executor.Parallel
		executor.Streamer
	}
	plainEvent struct{ executor.Event }
	timedEvent struct{ executor.TimedEvent }

	plainSpace  struct{ memspace.Space }
	statsSpace  struct{ memspace.StatsSpace }
	lookupSpace struct {
		memspace.Space
		memspace.Lookuper
	}
	availSpace struct {
		memspace.Space
		memspace.Availability
	}
	fullSpace struct {
		memspace.StatsSpace
		memspace.Lookuper
		memspace.Availability
	}
)

func TestCapabilitiesOfEachInterface(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    any
		want []string
	}{
		{"comm.Comm", (*p2pComm)(nil), []string{xpu.CapP2P}},
		{"comm.Blocking", (*blockingComm)(nil), []string{xpu.CapBlocking, xpu.CapP2P}},
		{"comm.Blocking alone", (*blockingOnly)(nil), []string{xpu.CapBlocking}},
		{"comm.Collectives", (*nativeComm)(nil), []string{xpu.CapCollectivesNative, xpu.CapP2P}},
		{"all of comm", (*fullComm)(nil), []string{xpu.CapBlocking, xpu.CapCollectivesNative, xpu.CapOneSided, xpu.CapNotify, xpu.CapP2P}},
		{"comm.OneSided", (*oneSidedComm)(nil), []string{xpu.CapOneSided, xpu.CapP2P}},
		{"executor.Executor", (*plainExec)(nil), nil},
		{"executor.Parallel", (*parallelExec)(nil), []string{xpu.CapParallel}},
		{"executor.Streamer", (*streamExec)(nil), []string{xpu.CapStreams}},
		{"all of executor", (*fullExec)(nil), []string{xpu.CapParallel, xpu.CapStreams}},
		{"executor.Event", (*plainEvent)(nil), nil},
		{"executor.TimedEvent", (*timedEvent)(nil), []string{xpu.CapEventsTiming}},
		{"memspace.Space", (*plainSpace)(nil), nil},
		{"memspace.StatsSpace", (*statsSpace)(nil), []string{xpu.CapMemoryStats}},
		{"memspace.Lookuper", (*lookupSpace)(nil), []string{xpu.CapMemoryLookup}},
		{"memspace.Availability", (*availSpace)(nil), []string{xpu.CapMemoryAvailable}},
		{"all of memspace", (*fullSpace)(nil), []string{xpu.CapMemoryAvailable, xpu.CapMemoryLookup, xpu.CapMemoryStats}},
		// A component given as a value implements what its method set has.
		{"a value", fullComm{}, []string{xpu.CapBlocking, xpu.CapCollectivesNative, xpu.CapOneSided, xpu.CapNotify, xpu.CapP2P}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, xpu.CapabilitiesOf(tc.c))
		})
	}
}

func TestCapabilitiesOfNothing(t *testing.T) {
	assert.Empty(t, xpu.CapabilitiesOf())
	assert.Empty(t, xpu.CapabilitiesOf(nil))
	assert.Empty(t, xpu.CapabilitiesOf(42, "cpu", struct{}{}, (*int)(nil)))
	var c comm.Comm // a nil interface implements nothing
	assert.Empty(t, xpu.CapabilitiesOf(c))
}

// Several components give the union of their capabilities, sorted, each
// once.
func TestCapabilitiesOfComposition(t *testing.T) {
	got := xpu.CapabilitiesOf((*statsSpace)(nil), (*fullSpace)(nil), (*fullExec)(nil), (*timedEvent)(nil),
		(*blockingComm)(nil), (*fullComm)(nil), (*p2pComm)(nil))
	assert.Equal(t, []string{"blocking", "collectives.native", "events.timing", "memory.available", "memory.lookup",
		"memory.stats", "onesided", "onesided.notify", "p2p", "parallel", "streams"}, got)
	assert.True(t, slices.IsSorted(got))
	assert.Equal(t, len(got), len(slices.Compact(slices.Clone(got))), "no duplicates")

	// Order of the arguments does not matter.
	assert.Equal(t, xpu.CapabilitiesOf((*streamExec)(nil), (*lookupSpace)(nil), (*nativeComm)(nil)),
		xpu.CapabilitiesOf((*nativeComm)(nil), (*lookupSpace)(nil), (*streamExec)(nil)))
	assert.Equal(t, []string{xpu.CapMemoryStats}, xpu.CapabilitiesOf((*statsSpace)(nil), (*statsSpace)(nil), (*plainSpace)(nil)))
}

// Derived lists exactly what CapabilitiesOf can derive: a name added to
// one must be added to the other.
func TestDerived(t *testing.T) {
	all := xpu.CapabilitiesOf((*fullSpace)(nil), (*fullExec)(nil), (*timedEvent)(nil), (*fullComm)(nil))
	derived := slices.Sorted(slices.Values(xpu.Derived))
	assert.Equal(t, derived, all)
	assert.Equal(t, len(derived), len(slices.Compact(slices.Clone(derived))), "Derived has duplicates")
}
