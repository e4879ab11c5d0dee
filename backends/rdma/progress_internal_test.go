package rdma

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/rdma/internal/fabric"
)

// armFake is a completion queue with nothing in it that counts arms,
// polls and wake-ups; the rest of fabric.Context is not called.
type armFake struct {
	fabric.Context
	arms, polls, wakes atomic.Int32
}

func (f *armFake) Arm() error                            { f.arms.Add(1); return nil }
func (f *armFake) Poll([]fabric.Completion) (int, error) { f.polls.Add(1); return 0, nil }
func (f *armFake) Wake()                                 { f.wakes.Add(1) }

// A goroutine about to block arms the queue and polls once more; when
// another goroutine holds the poller's role it cannot, and wakes the
// engine to look after the arming instead (a completion that came between
// the other's poll and the arming raised no event).
func TestArmForWaiterWakesTheEngineWhenAnotherPolls(t *testing.T) {
	f := &armFake{}
	c := &Comm{fc: f, lifecycle: lifecycle{progressStarted: true}}

	c.armForWaiter()
	require.Equal(t, int32(1), f.arms.Load())
	require.Equal(t, int32(1), f.polls.Load(), "the role is free: the waiter polls after arming")
	require.Zero(t, f.wakes.Load(), "and wakes nobody")

	c.polling.Store(true) // a Test or a spinning waiter polls
	c.armForWaiter()
	require.Equal(t, int32(2), f.arms.Load())
	require.Equal(t, int32(1), f.polls.Load(), "the role is held: no poll")
	require.Equal(t, int32(1), f.wakes.Load(), "the engine is woken to poll after the arming")
}
