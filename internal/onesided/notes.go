package onesided

import (
	"context"
	"sync"

	"github.com/xpu-go/xpu/comm"
)

// Notes is a rank's notifications received and not yet taken
// (comm.Notifier's WaitNotification), in the order they arrived. Its zero
// value is ready to use; it is safe for concurrent use.
type Notes struct {
	mu     sync.Mutex
	q      []comm.Notification
	wake   chan struct{} // closed when a notification arrives or the queue closes
	closed error
}

// Push queues a notification from rank src. It reports false, dropping
// it, once the queue is closed.
func (n *Notes) Push(src int, msg []byte) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed != nil {
		return false
	}
	n.q = append(n.q, comm.Notification{Source: src, Msg: msg})
	if n.wake != nil {
		close(n.wake)
		n.wake = nil
	}
	return true
}

// TryPop returns the oldest notification queued and true, or false when
// there is none; once the queue is closed it returns the error Close was
// given.
func (n *Notes) TryPop() (comm.Notification, bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed != nil {
		return comm.Notification{}, false, n.closed
	}
	if len(n.q) == 0 {
		return comm.Notification{}, false, nil
	}
	return n.popLocked(), true, nil
}

// popLocked takes the oldest notification; mu is held and one is queued.
func (n *Notes) popLocked() comm.Notification {
	got := n.q[0]
	n.q[0] = comm.Notification{}
	n.q = n.q[1:]
	if len(n.q) == 0 {
		n.q = nil
	}
	return got
}

// Wait returns the oldest notification queued, waiting for one until ctx
// ends; with an ended ctx it returns one queued, or ctx's error. Once the
// queue is closed it returns the error Close was given.
func (n *Notes) Wait(ctx context.Context) (comm.Notification, error) {
	for {
		n.mu.Lock()
		if n.closed != nil {
			n.mu.Unlock()
			return comm.Notification{}, n.closed
		}
		if len(n.q) > 0 {
			got := n.popLocked()
			n.mu.Unlock()
			return got, nil
		}
		if err := ctx.Err(); err != nil {
			n.mu.Unlock()
			return comm.Notification{}, err
		}
		if n.wake == nil {
			n.wake = make(chan struct{})
		}
		wake := n.wake
		n.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
	}
}

// Close drops the notifications queued and makes every Wait, pending or
// later, return err.
func (n *Notes) Close(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed != nil {
		return
	}
	n.closed, n.q = err, nil
	if n.wake != nil {
		close(n.wake)
		n.wake = nil
	}
}
