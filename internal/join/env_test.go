package join_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/join"
)

// TestFirstHost expands the first entry of Slurm host lists in their
// simple forms, and refuses the others.
func TestFirstHost(t *testing.T) {
	for in, want := range map[string]string{
		"n1":               "n1",
		"a,b":              "a",
		"node[01-04,07]":   "node01",
		"node[3],x[1-2]":   "node3",
		"rack1-n[001-100]": "rack1-n001",
		"":                 "",
		"bad]":             "",
		"x[a-b]":           "",
	} {
		require.Equal(t, want, join.FirstHost(in), in)
	}
}
