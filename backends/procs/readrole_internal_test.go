package procs

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/p2p"
)

// TestAwaitHolder checks what Close relies on before it lets go of a
// link: awaitHolder returns only once the waiter holding the read role
// has given it back, and then at once.
func TestAwaitHolder(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var parked atomic.Int32
	ro := &readRole{conn: a, parked: &parked, grant: make(chan struct{}, 1), wake: make(chan struct{}, 1), idle: time.Hour}
	ro.released.L = &ro.mu

	held, _, stop := ro.takeForWaiter(context.Background(), new(p2p.Done))
	require.True(t, held, "a free role goes to the first waiter")
	require.Nil(t, stop, "a context that never ends needs no watch")
	require.EqualValues(t, 1, ro.directReads())

	ro.close()
	waitsFor(t, "awaitHolder", ro.awaitHolder, "the holder's release", ro.release)
	held, _, _ = ro.takeForWaiter(context.Background(), new(p2p.Done))
	require.False(t, held, "a closed role goes to no waiter")
	ro.awaitHolder() // nobody holds it: returns at once
}

// waitsFor checks that wait, run in a goroutine, is still waiting 50 ms
// on, and returns within 10 s once event has run.
func waitsFor(t *testing.T, name string, wait func(), what string, event func()) {
	t.Helper()
	returned := make(chan struct{})
	go func() {
		wait()
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatalf("%s returned before %s", name, what)
	case <-time.After(50 * time.Millisecond):
	}
	event()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s of %s", name, what)
	}
}
