package procs

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/flight"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/xerr"
)

// ErrAuth reports a connection that could not prove membership of the job:
// a wrong secret, a garbled or foreign handshake, or a rank or world size
// that does not fit. It matches comm.ErrInvalidArgument too.
var ErrAuth = xerr.ErrAuth

// ErrJoinTimeout reports that a job did not form within the join timeout
// (Config.JoinTimeout, DefaultJoinTimeout by default): nothing of this job
// answered at the master address, or ranks never joined or never
// connected. Its message names what was missing ("no rank 0 listening at
// 10.0.0.1:29500 after 1m0s", "ranks 2, 5 of 8 never joined at
// 10.0.0.1:29500 after 1m0s"). It matches context.DeadlineExceeded; the
// error of Dial's context ending does not match it.
var ErrJoinTimeout = join.ErrTimeout

// joinInterval is how often a rank still joining logs its progress, in
// nanoseconds; zero means JoinProgressInterval. Tests shorten it.
var joinInterval atomic.Int64

// Dial joins the job cfg describes and returns this rank once it is
// connected to every other rank. Rank 0 listens on cfg.MasterAddr (or
// cfg.Listener) and serves the rendezvous store there; every other rank
// publishes its own listening address in the store and dials every lower
// rank, so each pair of ranks shares one connection. Every connection
// starts with a mutual HMAC challenge-response over cfg.Secret; strangers
// are refused and the job goes on.
//
// A rank other than 0 retries while nothing listens at the master address,
// and while what listens there is not this job's rank 0 (another job's,
// whose port this job's shares: its listener closes once its own job has
// formed). Dial returns when every link is up; when the join timeout
// (cfg.JoinTimeout) passes first, an error matching ErrJoinTimeout that
// names what was missing; when ctx ends first, ctx's error (wrapped),
// saying what this rank was waiting for. While it waits it logs to
// cfg.Logger, every JoinProgressInterval, what it waits for. Rank 0 fails
// at once when the master's port is taken, naming the port and
// XPU_MASTER_PORT.
func Dial(ctx context.Context, cfg Config) (*Comm, error) {
	ncfg, err := cfg.normalize()
	if err != nil {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		return nil, err
	}
	c := newComm(ncfg)
	// Closed by Close, as every path below closes c or hands it over.
	c.rec = flight.New(flight.SizeFromEnv(), flight.Context{Rank: ncfg.Rank, Size: ncfg.Size, Backend: Name, Comm: "world"})
	if ncfg.Size == 1 {
		if ncfg.Listener != nil {
			_ = ncfg.Listener.Close()
		}
		return c, nil
	}
	if err := c.connect(ctx); err != nil {
		_ = c.Close()
		return nil, xerr.Op(Name, "dial", fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err))
	}
	c.tuneShm()
	return c, nil
}

// connect forms the job through package join, whose links come back
// authenticated and, where both ranks share a node, moved onto shared
// memory (linkConn); then it starts a link per peer.
func (c *Comm) connect(ctx context.Context) error {
	job, err := join.Dial(ctx, join.Config{
		Backend: Name, Rank: c.rank, Size: c.size, MasterAddr: c.cfg.MasterAddr, PortFrom: c.cfg.portFrom,
		Secret: c.cfg.Secret, Listener: c.cfg.Listener, AdvertiseHost: c.cfg.AdvertiseHost,
		Timeout: c.cfg.JoinTimeout, StepTimeout: c.cfg.Timeout,
		Terms: join.Terms{Limit: uint32(c.lim.eager), Budget: uint64(c.lim.budget)},
		Tune:  c.tune, Upgrade: c.linkConn,
		Logger: c.cfg.Logger, Interval: time.Duration(joinInterval.Load()), Logf: c.cfg.Logf,
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	for j, p := range job.Peers {
		if j != c.rank {
			c.links[j] = newLink(c, j, p.Conn, p.Terms)
		}
	}
	links := append([]*link(nil), c.links...)
	c.mu.Unlock()
	for _, l := range links {
		if l != nil {
			l.start()
		}
	}
	c.bg.Add(1)
	go c.monitor()
	return nil
}

// tune sets the socket options of a link or store connection.
func (c *Comm) tune(conn net.Conn) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetNoDelay(true)
	_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{
		Enable: true, Idle: max(c.cfg.Timeout/2, time.Second), Interval: max(c.cfg.Timeout/8, time.Second), Count: 4,
	})
	setUserTimeout(tc, c.cfg.Timeout)
}
