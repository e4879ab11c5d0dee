package procs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
)

// TestOptionsConfig checks what each option sets in the Config of the
// groups and the rank Open makes: sizes with units, eager_limit=0 as no
// eager messages, and the defaults, which normalize keeps.
func TestOptionsConfig(t *testing.T) {
	for _, tc := range []struct {
		opts xpu.Options
		want Config
	}{
		{xpu.Options{}, Config{EagerLimit: DefaultEagerLimit, EagerBudget: DefaultEagerBudget}},
		{xpu.Options{OptTimeout: "3s", OptEagerLimit: "16K", OptEagerBudget: "2 MiB"},
			Config{Timeout: 3 * time.Second, EagerLimit: 16 << 10, EagerBudget: 2 << 20}},
		{xpu.Options{OptEagerLimit: "0"}, Config{EagerLimit: -1, EagerBudget: DefaultEagerBudget}},
		{xpu.Options{"tcp." + OptEagerLimit: "1G", OptEagerLimit: "8", "cpu.limit": "1K"},
			Config{EagerLimit: MaxEagerLimit, EagerBudget: DefaultEagerBudget}},
		{xpu.Options{OptEagerBudget: "1TiB"}, Config{EagerLimit: DefaultEagerLimit, EagerBudget: MaxEagerBudget}},
	} {
		cfg, err := optionsConfig(tc.opts)
		require.NoError(t, err, "%v", tc.opts)
		require.Equal(t, tc.want, cfg, "%v", tc.opts)
	}
}

// TestNormalizeBounds checks the bounds of a Config given through the Go
// API: the same constants as the options', one check each.
func TestNormalizeBounds(t *testing.T) {
	base := Config{Rank: 0, Size: 1, Secret: []byte("s")}
	for _, tc := range []struct {
		name   string
		edit   func(*Config)
		ok     bool
		limit  int
		budget int
	}{
		{"defaults", func(*Config) {}, true, DefaultEagerLimit, DefaultEagerBudget},
		{"no eager", func(c *Config) { c.EagerLimit = -1 }, true, 0, DefaultEagerBudget},
		{"limit above budget", func(c *Config) { c.EagerLimit, c.EagerBudget = 8<<10, 4<<10 }, true, 4 << 10, 4 << 10},
		{"largest", func(c *Config) { c.EagerLimit, c.EagerBudget = MaxEagerLimit, MaxEagerBudget }, true, MaxEagerLimit, MaxEagerBudget},
		{"limit too large", func(c *Config) { c.EagerLimit = MaxEagerLimit + 1 }, false, 0, 0},
		{"budget too large", func(c *Config) { c.EagerBudget = MaxEagerBudget + 1 }, false, 0, 0},
		{"negative budget", func(c *Config) { c.EagerBudget = -1 }, false, 0, 0},
		{"chunk too small", func(c *Config) { c.Chunk = minChunk - 1 }, false, 0, 0},
	} {
		cfg := base
		tc.edit(&cfg)
		n, err := cfg.normalize()
		if !tc.ok {
			require.ErrorIs(t, err, xpu.ErrInvalidArgument, tc.name)
			require.NotContains(t, err.Error(), "\n", tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.limit, n.EagerLimit, tc.name)
		require.Equal(t, tc.budget, n.EagerBudget, tc.name)
	}
}
