//go:build unix

package flight_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/flight"
)

// With a dump directory in the environment, DumpSignal makes every open
// recorder write its record there, and the process goes on; once the last
// recorder is closed, the signal goroutine is gone (goleak, in TestMain).
func TestDumpSignal(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(flight.EnvDir, dir)
	a := flight.New(8, flight.Context{Rank: 0, Size: 2, Comm: "world"})
	b := flight.New(8, flight.Context{Rank: 0, Size: 2, Comm: "split"})
	a.Post(flight.OpRecv, 1, 3, 8)
	require.NoError(t, syscall.Kill(syscall.Getpid(), flight.DumpSignal.(syscall.Signal)))
	want := []string{
		filepath.Join(dir, flight.FileName(0, a.Serial())),
		filepath.Join(dir, flight.FileName(0, b.Serial())),
	}
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		got, _ = filepath.Glob(filepath.Join(dir, "flight.rank*.json"))
		if len(got) == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	assert.ElementsMatch(t, want, got, "the records written on %v within 10s", flight.DumpSignal)
	ds, err := flight.ReadDir(dir)
	require.NoError(t, err)
	for _, d := range ds {
		assert.Equal(t, "timeout", d.Reason)
	}
	a.Close()
	b.Close()
}
