package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/xerr"
)

// maxHandshakes bounds the connections being authenticated at once, so a
// flood of strangers cannot exhaust a rank.
const maxHandshakes = 256

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

// setup is the state of a Dial in progress.
type setup struct {
	mu      sync.Mutex
	nlinks  int
	linksUp chan struct{} // closed when every link is up
	linked  *join.Roster  // the peers whose link is up
	store   *storeServer  // rank 0 only
	fatal   chan error    // first fatal error
	wait    *join.Wait
}

func (s *setup) fail(err error) {
	select {
	case s.fatal <- err:
	default:
	}
}

// connect forms the job under the join timeout and ctx.
func (c *Comm) connect(ctx context.Context) error {
	w, ctx := join.Start(ctx, join.Params{Backend: Name, Rank: c.rank, Size: c.size, Master: c.cfg.MasterAddr,
		Timeout: c.cfg.JoinTimeout, Logger: c.cfg.Logger, Interval: time.Duration(joinInterval.Load())})
	s := &setup{linksUp: make(chan struct{}), linked: join.NewRoster(c.size, c.rank), fatal: make(chan error, 1), wait: w}
	err := c.form(ctx, w, s)
	if err != nil && s.store != nil && w.TimedOut() {
		// The ranks waiting on the store for a rank that never came are
		// told why rank 0 gives up before Close cuts them off.
		s.store.drain(time.Second)
	}
	return w.End(err)
}

func (c *Comm) form(ctx context.Context, w *join.Wait, s *setup) error {
	c.bg.Add(1)
	go c.monitor()

	master := c.cfg.MasterAddr
	var ln net.Listener
	var sc *storeClient
	if c.rank == 0 {
		ln = c.cfg.Listener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", master); err != nil {
				return c.listenErr(err)
			}
		}
		s.store = newStoreServer(c.size)
		w.Await(
			join.Step{Ranks: s.store.arrived, Waiting: "to join at " + master, Failed: "never joined at " + master},
			join.Step{Ranks: s.linked, Waiting: "to connect with rank 0", Failed: "joined but never connected with rank 0"},
			join.Step{Ranks: s.store.finished, Waiting: "to connect with every lower rank",
				Failed: "joined but never connected with every lower rank"},
		)
	} else {
		w.Reaching()
		conn, err := c.dialMaster(ctx, w)
		if err != nil {
			return err
		}
		sc = &storeClient{conn: conn}
		defer sc.conn.Close()
		host := c.cfg.AdvertiseHost
		if host == "" {
			host = conn.LocalAddr().(*net.TCPAddr).IP.String()
		}
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	c.lnMu.Lock()
	c.ln = ln
	c.lnMu.Unlock()
	c.bg.Add(1)
	go c.acceptLoop(ctx, ln, s)

	if c.rank > 0 {
		if err := sc.call(ctx, storeSet, addrKey(c.rank), ln.Addr().String()); err != nil {
			return fmt.Errorf("publish this rank's address: %w", err)
		}
		linkStep := join.Step{Ranks: s.linked, Waiting: fmt.Sprintf("to connect with rank %d", c.rank),
			Failed: fmt.Sprintf("never connected with rank %d", c.rank)}
		var wg sync.WaitGroup
		for j := range c.rank {
			// One request at a time on the store connection; the links
			// are dialed in parallel.
			addr := master
			if j > 0 {
				w.Await(join.Step{Ranks: join.Awaiting(c.size, j), Waiting: "to join at " + master,
					Failed: "never joined at " + master}, linkStep)
				var err error
				if addr, err = sc.get(ctx, addrKey(j)); err != nil {
					wg.Wait()
					return fmt.Errorf("address of rank %d: %w", j, err)
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, h, err := c.dialPeer(ctx, addr, j)
				if err != nil {
					s.fail(fmt.Errorf("link to rank %d at %s: %w", j, addr, err))
					return
				}
				if !c.addLink(s, newLink(c, j, conn, h)) {
					_ = conn.Close()
				}
			}()
		}
		w.Await(linkStep)
		wg.Wait()
		select {
		case err := <-s.fatal:
			return err
		default:
		}
		if err := sc.call(ctx, storeDone, "", ""); err != nil {
			return fmt.Errorf("leave the store: %w", err)
		}
	}
	for _, ch := range []<-chan struct{}{s.linksUp, s.store.allDone()} {
		select {
		case <-ch:
		case err := <-s.fatal:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.closeListener()
	return nil
}

// listenErr describes rank 0's failure to listen on the master address.
func (c *Comm) listenErr(err error) error {
	host, port, _ := net.SplitHostPort(c.cfg.MasterAddr)
	if errors.Is(err, syscall.EADDRINUSE) {
		from := ""
		if c.cfg.portFrom != "" {
			from = "; the port was " + c.cfg.portFrom
		}
		return fmt.Errorf("master port %s is in use on %s (by another job's rank 0 or another program%s): "+
			"set %s to a free port: %w", port, host, from, EnvMasterPort, err)
	}
	return fmt.Errorf("listen on the master address %s (is %s an address of this host?): %w",
		c.cfg.MasterAddr, EnvMasterAddr, err)
}

// dialMaster connects to the store of rank 0 and authenticates, retrying
// until ctx ends while nothing answers at the master address and while
// what answers is not this job's rank 0, and telling w which. Attempts on
// another job's rank 0 back off further (to foreignBackoff), to spare that
// job's formation.
func (c *Comm) dialMaster(ctx context.Context, w *join.Wait) (net.Conn, error) {
	const retryBackoff, foreignBackoff = 500 * time.Millisecond, 2 * time.Second
	var d net.Dialer
	backoff, limit := 5*time.Millisecond, retryBackoff
	for {
		conn, err := d.DialContext(ctx, "tcp", c.cfg.MasterAddr)
		if err == nil {
			c.tune(conn)
			_, err = c.authenticate(ctx, conn, true, purposeStore,
				func(p uint8, r int) bool { return p == purposeStore && r == 0 })
			if err == nil {
				return conn, nil
			}
			_ = conn.Close()
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
		if errors.Is(err, ErrAuth) {
			w.Foreign(err)
			limit = foreignBackoff
		} else {
			w.NoAnswer(err)
			limit = retryBackoff
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-c.stop:
			return nil, comm.ErrClosed
		}
		backoff = min(2*backoff, limit)
	}
}

func addrKey(rank int) string { return "addr/" + strconv.Itoa(rank) }

// addLink installs l and starts it; false when the slot is taken or the
// rank is closed.
func (c *Comm) addLink(s *setup, l *link) bool {
	c.mu.Lock()
	if c.closed || c.links[l.peer] != nil {
		c.mu.Unlock()
		return false
	}
	c.links[l.peer] = l
	c.mu.Unlock()
	l.start()
	s.linked.Arrive(l.peer)
	s.mu.Lock()
	s.nlinks++
	if s.nlinks == c.size-1 {
		close(s.linksUp)
	}
	s.mu.Unlock()
	return true
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

// hello returns this rank's hello for purpose.
func (c *Comm) hello(purpose uint8) hello {
	return hello{purpose: purpose, rank: uint32(c.rank), size: uint32(c.size),
		eager: uint32(c.lim.eager), budget: uint64(c.lim.budget)}
}

// dialAuth connects to addr, retrying while nobody listens there yet, and
// authenticates as a client for purpose, expecting rank want.
func (c *Comm) dialAuth(ctx context.Context, addr string, want int, purpose uint8) (net.Conn, error) {
	conn, _, err := c.dialHello(ctx, addr, want, purpose)
	return conn, err
}

func (c *Comm) dialPeer(ctx context.Context, addr string, want int) (net.Conn, hello, error) {
	return c.dialHello(ctx, addr, want, purposePeer)
}

func (c *Comm) dialHello(ctx context.Context, addr string, want int, purpose uint8) (net.Conn, hello, error) {
	var d net.Dialer
	backoff := 5 * time.Millisecond
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.tune(conn)
			h, err := c.authenticate(ctx, conn, true, purpose, func(p uint8, r int) bool { return p == purpose && r == want })
			if err == nil && purpose == purposePeer {
				var lc net.Conn
				if lc, err = c.linkConn(ctx, conn, want, true); err == nil {
					conn = lc
				}
			}
			if err != nil {
				_ = conn.Close()
				return nil, hello{}, err
			}
			return conn, h, nil
		}
		if ctx.Err() != nil {
			return nil, hello{}, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, hello{}, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case <-c.stop:
			return nil, hello{}, comm.ErrClosed
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// authenticate runs the handshake on conn under a deadline: the context's,
// and at most the timeout.
func (c *Comm) authenticate(ctx context.Context, conn net.Conn, dialer bool, purpose uint8, okRank func(uint8, int) bool) (hello, error) {
	stop := c.bound(ctx, conn)
	defer stop()
	return handshake(conn, c.cfg.Secret, c.hello(purpose), dialer, checkHello(c.size, okRank))
}

// bound gives conn a deadline for a step of setup: the context's, and at
// most the timeout. The function returned clears it.
func (c *Comm) bound(ctx context.Context, conn net.Conn) (clear func()) {
	dl := time.Now().Add(c.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		_ = conn.SetDeadline(time.Time{})
	}
}

// acceptLoop takes connections until the listener closes: peer links from
// higher ranks and, on rank 0, store clients. Each is authenticated in its
// own goroutine; strangers are refused and logged.
func (c *Comm) acceptLoop(ctx context.Context, ln net.Listener, s *setup) {
	defer c.bg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		if !c.track(conn) {
			_ = conn.Close()
			continue
		}
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			c.serveConn(ctx, conn, s)
		}()
	}
}

// track remembers a connection so that Close can cut it; false when too
// many are in handshake or the listener is closed.
func (c *Comm) track(conn net.Conn) bool {
	c.lnMu.Lock()
	defer c.lnMu.Unlock()
	if c.ln == nil || len(c.conns) >= maxHandshakes {
		return false
	}
	c.conns[conn] = struct{}{}
	return true
}

func (c *Comm) untrack(conn net.Conn) {
	c.lnMu.Lock()
	delete(c.conns, conn)
	c.lnMu.Unlock()
}

func (c *Comm) serveConn(ctx context.Context, conn net.Conn, s *setup) {
	c.tune(conn)
	h, err := c.authenticate(ctx, conn, false, 0, func(p uint8, r int) bool {
		if p == purposeStore {
			return c.rank == 0 && r > 0
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return r > c.rank && c.links[r] == nil
	})
	if err != nil {
		c.untrack(conn)
		_ = conn.Close()
		if c.cfg.Logf != nil && !c.isClosed() {
			c.cfg.Logf("tcp: rank %d refused a connection from %v: %v", c.rank, conn.RemoteAddr(), err)
		}
		return
	}
	if h.purpose == purposePeer {
		lc, err := c.linkConn(ctx, conn, int(h.rank), false)
		c.untrack(conn)
		if err != nil {
			_ = conn.Close()
			s.fail(fmt.Errorf("link to rank %d: %w", h.rank, err))
			return
		}
		if !c.addLink(s, newLink(c, int(h.rank), lc, h)) {
			_ = lc.Close()
		}
		return
	}
	defer c.untrack(conn)
	defer conn.Close()
	s.store.serve(ctx, conn, int(h.rank), c.stop, s.wait.Summary)
}
