package procs_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
)

// loopback returns a conformance group factory of loopback groups made
// with tmpl.
func loopback(tmpl procs.Config) func(t *testing.T, n int) []comm.Comm {
	return func(t *testing.T, n int) []comm.Comm {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := procs.NewLoopbackGroupConfig(ctx, n, tmpl)
		require.NoError(t, err)
		out := make([]comm.Comm, n)
		for i, c := range cs {
			out[i] = c
		}
		return out
	}
}

// TestConformance runs the communicator suite over loopback groups with
// the default settings: ranks of one process share a node, so every link
// goes through shared memory; eager messages up to 64 KiB, larger ones by
// rendezvous, and the native collectives. Device buffers (comm/device) and
// regions (comm/onesided/regions) are blocks of the test device space,
// which the receiver, or a one-sided transfer's target, maps (ADR 41).
func TestConformance(t *testing.T) {
	dev := newDevSpace(t)
	conformance.TestComm(t, loopback(procs.Config{}), conformance.DeviceSpaces(dev), conformance.RegionSpaces(dev))
}

// TestConformanceTCP runs the suite with every link through TCP: device
// buffers are staged through host memory inside procs.
func TestConformanceTCP(t *testing.T) {
	dev := newDevSpace(t)
	conformance.TestComm(t, loopback(procs.Config{Links: procs.LinkTCP}), conformance.DeviceSpaces(dev), conformance.RegionSpaces(dev))
}

// TestConformanceMixed runs the suite over groups whose ranks sit on two
// nodes (even and odd ranks): links within a node through shared memory,
// across through TCP, under one matching engine.
func TestConformanceMixed(t *testing.T) {
	conformance.TestComm(t, loopback(procs.WithNodes(procs.Config{}, func(r int) string { return strconv.Itoa(r % 2) })))
}

// TestConformanceRendezvous runs the suite with every message by
// rendezvous and a small chunk, so that the announcement, clear-to-send,
// cancel and chunked-data paths carry everything, through shared-memory
// rings of 64 KiB (which every large message wraps many times; the rings'
// own tests take them down to 4 KiB) and through TCP.
func TestConformanceRendezvous(t *testing.T) {
	for _, links := range []procs.LinkMode{procs.LinkShm, procs.LinkTCP} {
		t.Run(links.String(), func(t *testing.T) {
			conformance.TestComm(t, loopback(procs.Config{EagerLimit: -1, Chunk: 4096, Links: links, ShmRing: 64 << 10}),
				conformance.MaxRanks(4))
		})
	}
}
