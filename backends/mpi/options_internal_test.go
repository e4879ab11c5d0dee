package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
)

// TestParseOptions: thread_level in any case and with spaces, scoped to mpi
// or bare; the default; keys of other backends skipped.
func TestParseOptions(t *testing.T) {
	for _, c := range []struct {
		opts xpu.Options
		want ThreadLevel
	}{
		{nil, ThreadMultiple},
		{xpu.Options{OptThreadLevel: "multiple"}, ThreadMultiple},
		{xpu.Options{OptThreadLevel: " Serialized "}, ThreadSerialized},
		{xpu.Options{"mpi." + OptThreadLevel: "serialized", OptThreadLevel: "multiple"}, ThreadSerialized},
		{xpu.Options{"tcp.timeout": "1s"}, ThreadMultiple},
	} {
		o, err := parseOptions(c.opts)
		require.NoError(t, err, c.opts)
		assert.Equal(t, c.want, o.ThreadLevel, c.opts)
	}
}

// TestLevel: the Go API's thread levels, and the error of one MPI is not
// asked for.
func TestLevel(t *testing.T) {
	for in, want := range map[ThreadLevel]ThreadLevel{0: ThreadMultiple, ThreadMultiple: ThreadMultiple, ThreadSerialized: ThreadSerialized} {
		got, err := Options{ThreadLevel: in}.level()
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := Options{ThreadLevel: ThreadFunneled}.level()
	require.ErrorIs(t, err, xpu.ErrInvalidArgument)
	assert.Equal(t, "mpi open: thread level funneled (want multiple or serialized): invalid argument", err.Error())
}
