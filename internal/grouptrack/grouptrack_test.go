package grouptrack_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/grouptrack"
	"github.com/xpu-go/xpu/memspace"
)

func TestTracker(t *testing.T) {
	tr := grouptrack.Tracker[*local.Comm]{Backend: "test"}
	cs, err := tr.Make(func() ([]*local.Comm, error) { return local.NewGroup(3, local.Options{}) })
	require.NoError(t, err)
	require.Len(t, cs, 3)
	boom := errors.New("boom")
	_, err = tr.Make(func() ([]*local.Comm, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	require.NoError(t, tr.CloseAll())
	_, err = cs[1].Irecv(memspace.Block{}, 0, 0)
	require.ErrorIs(t, err, comm.ErrClosed, "CloseAll closed the ranks")
	_, err = tr.Make(func() ([]*local.Comm, error) { t.Fatal("made after CloseAll"); return nil, nil })
	require.ErrorIs(t, err, comm.ErrClosed)
}

// TestTrackerCloseDuringMake: a group whose making CloseAll overtakes is
// closed, and Make says ErrClosed.
func TestTrackerCloseDuringMake(t *testing.T) {
	tr := grouptrack.Tracker[*local.Comm]{Backend: "test"}
	var made []*local.Comm
	_, err := tr.Make(func() ([]*local.Comm, error) {
		require.NoError(t, tr.CloseAll())
		cs, err := local.NewGroup(2, local.Options{})
		made = cs
		return cs, err
	})
	require.ErrorIs(t, err, comm.ErrClosed)
	_, err = made[0].Irecv(memspace.Block{}, 1, 0)
	require.ErrorIs(t, err, comm.ErrClosed, "the group made meanwhile is closed")
}
