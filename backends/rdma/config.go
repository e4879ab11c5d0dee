package rdma

import (
	"fmt"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/xerr"
)

// Defaults of Config.
const (
	DefaultEagerLimit   = 16 << 10
	MaxEagerLimit       = 64 << 10
	DefaultEagerBudget  = 1 << 20
	DefaultSlots        = 32
	DefaultChunk        = 1 << 20
	DefaultSpin         = 500 * time.Microsecond
	DefaultCloseTimeout = 5 * time.Second
	DefaultTimeout      = 10 * time.Second
)

// Config tunes a rank's protocol. The zero value means the defaults.
type Config struct {
	// EagerLimit is the largest message, in bytes, sent eagerly: copied
	// into a registered slot and sent at once. Larger messages are
	// announced and read by the receiver straight from the sender's
	// buffer (rendezvous). Zero means DefaultEagerLimit; a negative value
	// sends every message by rendezvous; at most MaxEagerLimit.
	EagerLimit int
	// EagerBudget bounds the eager bytes a peer holds for this rank
	// unmatched: past it, messages go by rendezvous. Zero means
	// DefaultEagerBudget.
	EagerBudget int
	// Slots is the number of receive slots each rank posts for each peer:
	// the messages that may be in flight between two ranks in each
	// direction. Zero means DefaultSlots; at least 4.
	Slots int
	// Chunk is the size of the RDMA READs a rendezvous receive is split
	// into. Zero means DefaultChunk.
	Chunk int
	// Spin is how long a goroutine waiting for a request, and the progress
	// engine, poll an empty completion queue before they sleep (the
	// engine on the completion channel): the latency of a busy-polling
	// MPI while messages flow, no core burnt while idle. The waiter of a
	// batch (PrepareXfers) polls until the batch completes, however long
	// that takes. Zero means DefaultSpin; a negative value never spins.
	Spin time.Duration
	// Timeout bounds failure detection: a peer from which nothing has
	// arrived for this long — no message, no heartbeat — is lost. Every
	// rank sends a heartbeat to a peer it has sent nothing to for
	// Timeout/4. A peer whose process dies is seen at once, through the
	// connection manager; the timeout catches a frozen process, a dead
	// host and a cut link. Zero means DefaultTimeout (XPU_RDMA_TIMEOUT in a
	// job).
	Timeout time.Duration
	// CloseTimeout bounds how long Close waits for its goodbyes to be
	// delivered. Zero means DefaultCloseTimeout.
	CloseTimeout time.Duration
}

// slotSize is the size of a receive or send slot: a header and the
// largest eager payload or notification.
func (c *Config) slotSize() int { return hdrLen + max(c.EagerLimit, comm.MaxNotification) }

// resolve fills in the defaults and checks the values.
func (c Config) resolve() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, xerr.Errorf(Name, "config", comm.ErrInvalidArgument, format, args...)
	}
	switch {
	case c.EagerLimit == 0:
		c.EagerLimit = DefaultEagerLimit
	case c.EagerLimit < 0:
		c.EagerLimit = -1
	case c.EagerLimit > MaxEagerLimit:
		return bad("eager limit %d above %d", c.EagerLimit, MaxEagerLimit)
	}
	switch {
	case c.EagerBudget == 0:
		c.EagerBudget = DefaultEagerBudget
	case c.EagerBudget < 0 || c.EagerBudget > 1<<31-1:
		return bad("eager budget %d out of range", c.EagerBudget)
	}
	switch {
	case c.Slots == 0:
		c.Slots = DefaultSlots
	case c.Slots < 4 || c.Slots > 1<<14:
		return bad("%d slots: want 4 to %d", c.Slots, 1<<14)
	}
	switch {
	case c.Chunk == 0:
		c.Chunk = DefaultChunk
	case c.Chunk < 4096 || c.Chunk > 1<<30:
		return bad("chunk %d: want 4 KiB to 1 GiB", c.Chunk)
	}
	if c.Spin == 0 {
		c.Spin = DefaultSpin
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	} else if c.Timeout < 0 {
		return bad("negative timeout %v", c.Timeout)
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	} else if c.CloseTimeout < 0 {
		return bad("negative close timeout %v", c.CloseTimeout)
	}
	return c, nil
}

func (c Config) String() string {
	return fmt.Sprintf("eager %d, budget %d, %d slots, chunk %d, spin %v", c.EagerLimit, c.EagerBudget, c.Slots, c.Chunk, c.Spin)
}

// errUnavailable is xpu.ErrUnavailable, named here without importing the
// root package into the protocol's files.
var errUnavailable = xerr.ErrUnavailable
