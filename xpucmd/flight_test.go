package xpucmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/flight"
)

// `xpu flight DIR` reads the records two ranks wrote — rank 1 waits for
// tag 7, rank 0 sent tag 8 — and says so.
func TestFlightCommand(t *testing.T) {
	dir := t.TempDir()
	r0 := flight.New(16, flight.Context{Rank: 0, Size: 2, Backend: "tcp", Comm: "world"})
	r1 := flight.New(16, flight.Context{Rank: 1, Size: 2, Backend: "tcp", Comm: "world"})
	t.Cleanup(r0.Close)
	t.Cleanup(r1.Close)
	r0.Record(flight.OpSend, 1, 8, 64)
	r1.Post(flight.OpRecv, 0, 7, 64)
	for _, r := range []*flight.Recorder{r0, r1} {
		_, err := r.WriteFile(dir, "SIGQUIT")
		require.NoError(t, err)
	}
	code, stdout, stderr := command(t, "flight", dir)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	assert.Contains(t, stdout, "flight records of 2 ranks in "+dir+":\n")
	assert.Regexp(t, `(?m)^  rank 1 waits in Recv\(src 0, tag 7, 64 bytes\) for \d+m?s; rank 0 sent tag 8 \(1 message\) to rank 1, unmatched$`, stdout)
	assert.Empty(t, stderr)
}

func TestFlightCommandRefuses(t *testing.T) {
	code, _, stderr := command(t, "flight")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "xpu flight takes one directory, got 0 arguments")

	empty := t.TempDir()
	code, _, stderr = command(t, "flight", empty)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no flight.rank*.json in "+empty)

	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "flight.rank0.1.json"), []byte("{"), 0o600))
	code, _, stderr = command(t, "flight", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "not a flight record")
}
