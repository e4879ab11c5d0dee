package arena_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/conformance"
	_ "github.com/xpu-go/xpu/examples/arena"
	"github.com/xpu-go/xpu/memspace"
)

// TestConformance is all a backend author writes to prove a backend: the
// suites for every concept it composes, opened by name as `xpu conformance`
// opens it, and the check that Info's capabilities are what it implements.
func TestConformance(t *testing.T) {
	conformance.RunDriver(t, "arena", nil)
}

// TestConformanceSmall runs the suites over the smallest arena they fit:
// they scale their largest blocks to the capacity the arena reports
// (Available).
func TestConformanceSmall(t *testing.T) {
	conformance.RunDriver(t, "arena", xpu.Options{"capacity": fmt.Sprint(conformance.MinCapacity)})
}

func TestCapacity(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "1MiB": 1 << 20, " 2 m ": 2 << 20} {
		b, err := xpu.Open(context.Background(), "arena", xpu.Options{"capacity": in})
		require.NoError(t, err, in)
		_, total, err := b.Memory.(memspace.Availability).Available()
		require.NoError(t, err)
		require.Equal(t, want, total, in)
		require.NoError(t, b.Close())
	}
}

func TestBadCapacity(t *testing.T) {
	for _, in := range []string{"-1", "0", "", "lots", "1.5G", "1X", "9999999999999P"} {
		_, err := xpu.Open(context.Background(), "arena", xpu.Options{"capacity": in})
		require.ErrorIs(t, err, xpu.ErrInvalidArgument, in)
		// The error names the key and the bad value.
		var oe *xpu.OptionError
		require.ErrorAs(t, err, &oe, in)
		require.Equal(t, "capacity", oe.Key)
		require.Equal(t, in, oe.Value)
		require.Contains(t, err.Error(), fmt.Sprintf("capacity=%q", in))
	}
	_, err := xpu.Open(context.Background(), "arena", xpu.Options{"capcity": "1MiB"})
	require.ErrorIs(t, err, xpu.ErrUnknownOption, "a typo is refused")
	require.Contains(t, err.Error(), "capacity", "and the known key named")
	b, err := xpu.Open(context.Background(), "arena", xpu.Options{"cpu.limit": "1K", "arena.capacity": "1MiB"})
	require.NoError(t, err, "keys scoped to another backend are skipped")
	_, total, err := b.Memory.(memspace.Availability).Available()
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), total)
	require.NoError(t, b.Close())
}
