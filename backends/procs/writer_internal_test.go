package procs

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// blockingConn is a connection whose writes wait until release is closed.
type blockingConn struct {
	net.Conn
	started, release chan struct{}
}

func (b blockingConn) Write(p []byte) (int, error) {
	close(b.started)
	<-b.release
	return len(p), nil
}

// TestAwaitQuiet checks what release relies on before it unmaps a
// link's segment: once the link is down, awaitQuiet returns only after
// the write under way has ended, and then at once.
func TestAwaitQuiet(t *testing.T) {
	bc := blockingConn{started: make(chan struct{}), release: make(chan struct{})}
	w := &writer{conn: bc, wake: make(chan struct{}, 1), lost: func(err error) error { return err }}
	w.quiet.L = &w.mu

	wrote := make(chan error, 1)
	go func() {
		w.mu.Lock()
		wrote <- w.writeInline(make([]byte, headerSize), nil)
	}()
	testwait.Closed(t, bc.started, "the inline write to start")
	w.mu.Lock()
	w.down = errors.New("link down")
	w.mu.Unlock()

	waitsFor(t, "awaitQuiet", w.awaitQuiet, "the write's end", func() { close(bc.release) })
	require.NoError(t, testwait.Recv(t, wrote, "the inline write"))
	w.awaitQuiet() // nothing writes: returns at once
}
