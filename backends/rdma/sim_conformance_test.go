package rdma_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/backends/rdma/internal/fabric/sim"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
)

// simGroups returns a conformance group factory of groups on the
// simulated fabric, which enforces what the hardware does (registered
// memory, a posted receive for every SEND, bytes read when a request
// runs) and fails a link on any breach.
func simGroups(cfg rdma.Config, opts ...sim.Option) func(t *testing.T, n int) []comm.Comm {
	return func(t *testing.T, n int) []comm.Comm {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		net := sim.New(opts...)
		cs, err := rdma.NewGroupOn(ctx, net.Provider("10.0.0.1"), "", "10.0.0.1", n, cfg)
		require.NoError(t, err)
		out := make([]comm.Comm, n)
		for i, c := range cs {
			out[i] = c
		}
		return out
	}
}

// TestSimConformance runs the communicator suite on the simulated fabric
// with the default settings.
func TestSimConformance(t *testing.T) {
	conformance.TestComm(t, simGroups(rdma.Config{}))
}

// TestSimConformanceRendezvous sends every message by rendezvous, read in
// small chunks, with few slots, so that the RTS, READ, FIN and cancel
// paths and the credits carry everything.
func TestSimConformanceRendezvous(t *testing.T) {
	conformance.TestComm(t, simGroups(rdma.Config{EagerLimit: -1, Chunk: 4096, Slots: 4}), conformance.MaxRanks(4))
}
