package local_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/commtest"
	"github.com/xpu-go/xpu/memspace"
)

// guard is the generous time limit that turns a hang into a failure.
const guard = commtest.Guard

// group makes a group and closes its ranks when the test ends.
func group(t testing.TB, n int, opts local.Options) []*local.Comm {
	t.Helper()
	return commtest.Group(t, n, local.NewGroup, opts)
}

// protocols are the option sets that force each protocol.
var protocols = []struct {
	name string
	opts local.Options
}{
	{"eager", local.Options{EagerLimit: 1 << 30}},
	{"rendezvous", local.Options{EagerLimit: -1}},
}

// blk views p as a block of the Go heap. It is safe to call from any
// goroutine (it reports a failure with Errorf, never FailNow).
func blk(t testing.TB, p []byte) memspace.Block {
	t.Helper()
	return commtest.Block(t, p)
}

// pattern returns n bytes that depend on seed.
func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) ^ seed
	}
	return p
}

// wait waits for r under the guard and fails the test on a hang.
func wait(t testing.TB, r comm.Request) (comm.Status, error) {
	t.Helper()
	return commtest.Wait(t, r, guard)
}

// pending asserts that r has not completed.
func pending(t testing.TB, r comm.Request) {
	t.Helper()
	_, done, err := r.Test()
	require.False(t, done, "request completed early (err %v)", err)
	require.NoError(t, err)
}

// isend starts a send and requires it to start.
func isend(t testing.TB, c *local.Comm, p []byte, dest, tag int) comm.Request {
	t.Helper()
	r, err := c.Isend(blk(t, p), dest, tag)
	require.NoError(t, err)
	return r
}

// irecv starts a receive and requires it to start.
func irecv(t testing.TB, c *local.Comm, p []byte, source, tag int) comm.Request {
	t.Helper()
	r, err := c.Irecv(blk(t, p), source, tag)
	require.NoError(t, err)
	return r
}

// fakeSpace is a space of tests; host says whether it is host-accessible.
type fakeSpace struct{ host bool }

func (s fakeSpace) Name() string {
	if s.host {
		return "fake-host"
	}
	return "fake-device"
}

func (s fakeSpace) Properties() memspace.Properties {
	if s.host {
		return memspace.Properties{Kind: "host", Device: -1, HostAccessible: true, Alignment: 1}
	}
	return memspace.Properties{Kind: "fake-device", Device: 0, DeviceAccessible: true, Alignment: 256}
}

func (fakeSpace) Allocate(size, align int) (memspace.Block, error) {
	return memspace.Block{}, memspace.ErrNotSupported
}

func (fakeSpace) Free(memspace.Block) error { return memspace.ErrForeignBlock }

// recvByte receives a 1-byte message from source with tag on c and checks
// that it is want.
func recvByte(t testing.TB, c *local.Comm, source, tag int, want byte, msgAndArgs ...any) {
	t.Helper()
	got := make([]byte, 1)
	_, err := wait(t, irecv(t, c, got, source, tag))
	require.NoError(t, err)
	assert.Equal(t, want, got[0], msgAndArgs...)
}
