package tcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/tcp"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
)

// loopback returns a conformance group factory of loopback groups made
// with tmpl.
func loopback(tmpl tcp.Config) func(t *testing.T, n int) []comm.Comm {
	return func(t *testing.T, n int) []comm.Comm {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := tcp.NewLoopbackGroupConfig(ctx, n, tmpl)
		require.NoError(t, err)
		out := make([]comm.Comm, n)
		for i, c := range cs {
			out[i] = c
		}
		return out
	}
}

// TestConformance runs the communicator suite over loopback groups with
// the default settings: eager messages up to 64 KiB, larger ones by
// rendezvous, and the native collectives.
func TestConformance(t *testing.T) {
	conformance.TestComm(t, loopback(tcp.Config{}))
}

// TestConformanceRendezvous runs the suite with every message by
// rendezvous and a small chunk, so that the announcement, clear-to-send,
// cancel and chunked-data paths carry everything.
func TestConformanceRendezvous(t *testing.T) {
	conformance.TestComm(t, loopback(tcp.Config{EagerLimit: -1, Chunk: 4096}), conformance.MaxRanks(4))
}
