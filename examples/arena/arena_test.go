package arena_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/conformance"
	_ "github.com/xpu-go/xpu/examples/arena"
)

// TestConformance is all a backend author writes to prove a backend: the
// suites for every concept it composes, from one factory.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *xpu.Backend {
		b, err := xpu.Open(context.Background(), "arena", xpu.Options{"capacity": "268435456"})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, b.Close()) })
		return b
	})
}

func TestBadCapacity(t *testing.T) {
	_, err := xpu.Open(context.Background(), "arena", xpu.Options{"capacity": "-1"})
	require.ErrorIs(t, err, xpu.ErrInvalidArgument)
}
