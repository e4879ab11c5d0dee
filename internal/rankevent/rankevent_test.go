package rankevent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/rankevent"
)

func TestPeerDownAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	t.Setenv(jobenv.Events, path)
	before := time.Now()
	rankevent.PeerDown(0, 2, false, errors.New("EOF"))
	rankevent.PeerDown(3, 1, true, nil)
	rankevent.PeerDown(1, 0, false, errors.New(strings.Repeat("x", 5000)))
	// A line that is not an event, and a cut one, are skipped.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("hello\n{\"t\":1,\"rank\":0,\"peer\":1,\"kind\":\"other\"}\n{\"t\":17")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	ev, err := rankevent.Read(path)
	require.NoError(t, err)
	require.Len(t, ev, 3)
	assert.Equal(t, 0, ev[0].Rank)
	assert.Equal(t, 2, ev[0].Peer)
	assert.Equal(t, rankevent.PeerLost, ev[0].Kind)
	assert.Equal(t, "EOF", ev[0].Reason)
	assert.Equal(t, os.Getpid(), ev[0].Pid)
	assert.False(t, ev[0].Time.Before(before.Truncate(time.Microsecond)), "%v before %v", ev[0].Time, before)
	assert.False(t, ev[1].Time.Before(ev[0].Time))
	assert.Equal(t, rankevent.PeerClosed, ev[1].Kind)
	assert.Empty(t, ev[1].Reason)
	assert.Len(t, ev[2].Reason, 512, "a long reason is cut")
}

// Without the variable, or when the launcher has removed the file, nothing
// is written and nothing is created.
func TestPeerDownWithoutLauncher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone")
	t.Setenv(jobenv.Events, "")
	rankevent.PeerDown(0, 1, false, nil)
	t.Setenv(jobenv.Events, path)
	rankevent.PeerDown(0, 1, false, nil)
	_, err := os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = rankevent.Read(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
