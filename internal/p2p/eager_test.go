package p2p_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/internal/p2p"
)

var bounds = p2p.Bounds{DefaultLimit: 64 << 10, MaxLimit: 1 << 30, DefaultBudget: 4 << 20, MaxBudget: 1 << 40}

func TestRead(t *testing.T) {
	for _, c := range []struct {
		opts          xpu.Options
		limit, budget int
	}{
		{nil, 64 << 10, 4 << 20},
		{xpu.Options{"eager_limit": "16K", "eager_budget": "1M"}, 16 << 10, 1 << 20},
		{xpu.Options{"eager_limit": "0"}, -1, 4 << 20},
		{xpu.Options{"eager_limit": "1GiB", "eager_budget": "1"}, 1 << 30, 1},
	} {
		r := c.opts.Reader("b")
		limit, budget := p2p.Read(r, bounds)
		require.NoError(t, r.Err(), c.opts)
		assert.Equal(t, []int{c.limit, c.budget}, []int{limit, budget}, c.opts)
	}
	for _, opts := range []xpu.Options{
		{"eager_limit": "-1"}, {"eager_limit": "1GiB1"}, {"eager_limit": "2G"}, {"eager_budget": "0"}, {"eager_budget": "2T"},
	} {
		r := opts.Reader("b")
		p2p.Read(r, bounds)
		assert.ErrorIs(t, r.Err(), xpu.ErrInvalidArgument, opts)
	}
}
