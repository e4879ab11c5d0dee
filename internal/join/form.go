package join

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/xpu-go/xpu/internal/jobenv"
)

// maxHandshakes bounds the connections being authenticated at once, so a
// flood of strangers cannot exhaust a rank.
const maxHandshakes = 256

// Config says how one rank forms its job. Rank, Size, MasterAddr (or, on
// rank 0, Listener) and Secret are required.
type Config struct {
	// Backend names the transport that joins, in messages and logs.
	Backend string
	// Rank of this process in [0, Size), and Size, the ranks of the job.
	Rank, Size int
	// MasterAddr is host:port of rank 0, which serves the rendezvous store
	// there and accepts links on the same port.
	MasterAddr string
	// PortFrom says where the master's port was taken from ("set by
	// XPU_MASTER_PORT"), for the error of a port in use.
	PortFrom string
	// Secret is the job's shared secret; every connection proves it.
	Secret []byte
	// Listener, when set on rank 0, is used instead of listening on
	// MasterAddr. Dial takes ownership.
	Listener net.Listener
	// AdvertiseHost is the host other ranks reach this rank at; by default
	// the local address of this rank's connection to rank 0.
	AdvertiseHost string
	// Timeout bounds the whole join (DefaultTimeout when zero, none but
	// the context's when negative).
	Timeout time.Duration
	// StepTimeout bounds each step of setup on one connection (the
	// handshake, Upgrade). It must be positive.
	StepTimeout time.Duration
	// Terms are announced to every peer in this rank's hello.
	Terms Terms
	// Tune, when set, sets the socket options of every connection.
	Tune func(net.Conn)
	// Upgrade, when set, runs on every link right after its handshake, on
	// both sides (dialer says which): the transport's own negotiation. The
	// connection it returns is the peer's in the Job. It is given the
	// StepTimeout's deadline; see Bound.
	Upgrade func(ctx context.Context, conn net.Conn, peer int, dialer bool) (net.Conn, error)
	// Logger receives the join's progress (slog.Default() when nil) every
	// Interval (ProgressInterval when zero); Logf, when set, the refused
	// connections.
	Logger   *slog.Logger
	Interval time.Duration
	Logf     func(format string, args ...any)
}

// Peer is one other rank of a formed job.
type Peer struct {
	// Conn is the authenticated connection to the peer (after Upgrade).
	Conn net.Conn
	// Terms are the peer's, from its hello.
	Terms Terms
}

// Job is a formed job: one authenticated connection to every other rank.
// Whoever holds it owns the connections.
type Job struct {
	Rank, Size int
	// Peers is indexed by rank; this rank's entry is zero.
	Peers []Peer
}

// Close closes every connection of j.
func (j *Job) Close() {
	for _, p := range j.Peers {
		if p.Conn != nil {
			_ = p.Conn.Close()
		}
	}
}

// Dial forms the job cfg describes and returns this rank's connections
// once every pair of ranks is connected. Rank 0 listens on cfg.MasterAddr
// (or cfg.Listener) and serves the rendezvous store there; every other
// rank publishes its own listening address in the store and dials every
// lower rank, so each pair of ranks shares one connection. Every
// connection starts with a mutual HMAC challenge-response over cfg.Secret;
// strangers are refused and the job goes on.
//
// A rank other than 0 retries while nothing listens at the master address,
// and while what listens there is not this job's rank 0 (another job's,
// whose port this job's shares: its listener closes once its own job has
// formed). When the join timeout passes first, Dial fails with an error
// matching ErrTimeout that names what was missing; when ctx ends first,
// with ctx's error (wrapped), saying what this rank was waiting for. Rank 0
// fails at once when the master's port is taken, naming the port and
// where it came from. The listeners are closed when Dial returns.
func Dial(ctx context.Context, cfg Config) (*Job, error) {
	f := &former{cfg: cfg, peers: make([]Peer, cfg.Size), conns: map[net.Conn]struct{}{},
		stop: make(chan struct{}), linksUp: make(chan struct{}), fatal: make(chan error, 1)}
	if cfg.Size == 1 {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		return &Job{Rank: cfg.Rank, Size: 1, Peers: f.peers}, nil
	}
	w, jctx := Start(ctx, Params{Backend: cfg.Backend, Rank: cfg.Rank, Size: cfg.Size, Master: cfg.MasterAddr,
		Timeout: cfg.Timeout, Logger: cfg.Logger, Interval: cfg.Interval})
	f.wait, f.linked = w, NewRoster(cfg.Size, cfg.Rank)
	err := f.form(jctx)
	if err != nil && f.store != nil && w.TimedOut() {
		// The ranks waiting on the store for a rank that never came are
		// told why rank 0 gives up before they are cut off.
		f.store.drain(time.Second)
	}
	f.shut()
	if err = w.End(err); err != nil {
		(&Job{Peers: f.peers}).Close()
		return nil, err
	}
	return &Job{Rank: cfg.Rank, Size: cfg.Size, Peers: f.peers}, nil
}

// former is the state of a Dial in progress.
type former struct {
	cfg  Config
	wait *Wait
	bg   sync.WaitGroup
	stop chan struct{} // closed when Dial ends

	mu      sync.Mutex
	ln      net.Listener // nil once closed
	conns   map[net.Conn]struct{}
	peers   []Peer
	nlinks  int
	linksUp chan struct{} // closed when every link is up
	linked  *Roster       // the peers whose link is up
	store   *storeServer  // rank 0 only
	fatal   chan error    // first fatal error
}

func (f *former) fail(err error) {
	select {
	case f.fatal <- err:
	default:
	}
}

// shut stops accepting, cuts the connections still in handshake, and
// waits for the goroutines of the join.
func (f *former) shut() {
	close(f.stop)
	f.mu.Lock()
	ln, conns := f.ln, f.conns
	f.ln, f.conns = nil, map[net.Conn]struct{}{}
	f.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for conn := range conns {
		_ = conn.Close()
	}
	f.bg.Wait()
}

func (f *former) form(ctx context.Context) error {
	cfg, w := &f.cfg, f.wait
	master := cfg.MasterAddr
	var ln net.Listener
	var sc *storeClient
	if cfg.Rank == 0 {
		ln = cfg.Listener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", master); err != nil {
				return f.listenErr(err)
			}
		}
		f.store = newStoreServer(cfg.Size)
		w.Await(
			Step{Ranks: f.store.arrived, Waiting: "to join at " + master, Failed: "never joined at " + master},
			Step{Ranks: f.linked, Waiting: "to connect with rank 0", Failed: "joined but never connected with rank 0"},
			Step{Ranks: f.store.finished, Waiting: "to connect with every lower rank",
				Failed: "joined but never connected with every lower rank"},
		)
	} else {
		w.Reaching()
		conn, err := f.dialMaster(ctx)
		if err != nil {
			return err
		}
		sc = &storeClient{conn: conn}
		defer sc.conn.Close()
		host := cfg.AdvertiseHost
		if host == "" {
			host = conn.LocalAddr().(*net.TCPAddr).IP.String()
		}
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	f.bg.Add(1)
	go f.acceptLoop(ctx, ln)

	if cfg.Rank > 0 {
		if err := f.dialLower(ctx, sc); err != nil {
			return err
		}
	}
	for _, ch := range []<-chan struct{}{f.linksUp, f.store.allDone()} {
		select {
		case <-ch:
		case err := <-f.fatal:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// dialLower publishes this rank's address in the store and connects to
// every lower rank, in parallel, reading their addresses from the store.
func (f *former) dialLower(ctx context.Context, sc *storeClient) error {
	cfg, w, master := &f.cfg, f.wait, f.cfg.MasterAddr
	if err := sc.call(ctx, storeSet, addrKey(cfg.Rank), f.ln.Addr().String()); err != nil {
		return fmt.Errorf("publish this rank's address: %w", err)
	}
	linkStep := Step{Ranks: f.linked, Waiting: fmt.Sprintf("to connect with rank %d", cfg.Rank),
		Failed: fmt.Sprintf("never connected with rank %d", cfg.Rank)}
	var wg sync.WaitGroup
	for j := range cfg.Rank {
		// One request at a time on the store connection; the links are
		// dialed in parallel.
		addr := master
		if j > 0 {
			w.Await(Step{Ranks: Awaiting(cfg.Size, j), Waiting: "to join at " + master,
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
			conn, h, err := f.dialHello(ctx, addr, j, purposePeer)
			if err != nil {
				f.fail(fmt.Errorf("link to rank %d at %s: %w", j, addr, err))
				return
			}
			if !f.addPeer(j, conn, h) {
				_ = conn.Close()
			}
		}()
	}
	w.Await(linkStep)
	wg.Wait()
	select {
	case err := <-f.fatal:
		return err
	default:
	}
	if err := sc.call(ctx, storeDone, "", ""); err != nil {
		return fmt.Errorf("leave the store: %w", err)
	}
	return nil
}

// listenErr describes rank 0's failure to listen on the master address.
func (f *former) listenErr(err error) error {
	host, port, _ := net.SplitHostPort(f.cfg.MasterAddr)
	if errors.Is(err, syscall.EADDRINUSE) {
		from := ""
		if f.cfg.PortFrom != "" {
			from = "; the port was " + f.cfg.PortFrom
		}
		return fmt.Errorf("master port %s is in use on %s (by another job's rank 0 or another program%s): "+
			"set %s to a free port: %w", port, host, from, jobenv.MasterPort, err)
	}
	return fmt.Errorf("listen on the master address %s (is %s an address of this host?): %w",
		f.cfg.MasterAddr, jobenv.MasterAddr, err)
}

// dialMaster connects to the store of rank 0 and authenticates, retrying
// until ctx ends while nothing answers at the master address and while
// what answers is not this job's rank 0, and telling the wait which.
// Attempts on another job's rank 0 back off further (to foreignBackoff),
// to spare that job's formation.
func (f *former) dialMaster(ctx context.Context) (net.Conn, error) {
	const retryBackoff, foreignBackoff = 500 * time.Millisecond, 2 * time.Second
	var d net.Dialer
	backoff, limit := 5*time.Millisecond, retryBackoff
	for {
		conn, err := d.DialContext(ctx, "tcp", f.cfg.MasterAddr)
		if err == nil {
			f.tune(conn)
			_, err = f.authenticate(ctx, conn, true, purposeStore,
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
			f.wait.Foreign(err)
			limit = foreignBackoff
		} else {
			f.wait.NoAnswer(err)
			limit = retryBackoff
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
		backoff = min(2*backoff, limit)
	}
}

func addrKey(rank int) string { return "addr/" + strconv.Itoa(rank) }

// addPeer records the link to peer; false when the slot is taken or Dial
// has ended.
func (f *former) addPeer(peer int, conn net.Conn, h hello) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.stop:
		return false
	default:
	}
	if f.peers[peer].Conn != nil {
		return false
	}
	f.peers[peer] = Peer{Conn: conn, Terms: h.terms}
	f.linked.Arrive(peer)
	f.nlinks++
	if f.nlinks == f.cfg.Size-1 {
		close(f.linksUp)
	}
	return true
}

func (f *former) tune(conn net.Conn) {
	if f.cfg.Tune != nil {
		f.cfg.Tune(conn)
	}
}

// hello returns this rank's hello for purpose.
func (f *former) hello(purpose uint8) hello {
	return hello{purpose: purpose, rank: uint32(f.cfg.Rank), size: uint32(f.cfg.Size), terms: f.cfg.Terms}
}

// dialHello connects to addr, retrying while nobody listens there yet, and
// authenticates as a client for purpose, expecting rank want; a link is
// then upgraded.
func (f *former) dialHello(ctx context.Context, addr string, want int, purpose uint8) (net.Conn, hello, error) {
	var d net.Dialer
	backoff := 5 * time.Millisecond
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			f.tune(conn)
			h, err := f.authenticate(ctx, conn, true, purpose, func(p uint8, r int) bool { return p == purpose && r == want })
			if err == nil && purpose == purposePeer {
				conn, err = f.upgrade(ctx, conn, want, true)
			}
			if err != nil {
				_ = conn.Close()
				return nil, hello{}, err
			}
			return conn, h, nil
		}
		if ctx.Err() != nil {
			return nil, hello{}, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, hello{}, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// upgrade runs cfg.Upgrade on a link; on failure conn is left to the
// caller to close.
func (f *former) upgrade(ctx context.Context, conn net.Conn, peer int, dialer bool) (net.Conn, error) {
	if f.cfg.Upgrade == nil {
		return conn, nil
	}
	uc, err := f.cfg.Upgrade(ctx, conn, peer, dialer)
	if err != nil {
		return conn, err
	}
	return uc, nil
}

// authenticate runs the handshake on conn under a deadline: the context's,
// and at most the step timeout.
func (f *former) authenticate(ctx context.Context, conn net.Conn, dialer bool, purpose uint8, okRank func(uint8, int) bool) (hello, error) {
	clear := Bound(ctx, conn, f.cfg.StepTimeout)
	defer clear()
	return handshake(conn, f.cfg.Secret, f.hello(purpose), dialer, checkHello(f.cfg.Size, okRank))
}

// Bound gives conn a deadline for a step of setup: the context's, and at
// most d from now. The function returned clears it.
func Bound(ctx context.Context, conn net.Conn, d time.Duration) (clear func()) {
	dl := time.Now().Add(d)
	if cd, ok := ctx.Deadline(); ok && cd.Before(dl) {
		dl = cd
	}
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		_ = conn.SetDeadline(time.Time{})
	}
}

// acceptLoop takes connections until the listener closes: links from
// higher ranks and, on rank 0, store clients. Each is authenticated in its
// own goroutine; strangers are refused and logged.
func (f *former) acceptLoop(ctx context.Context, ln net.Listener) {
	defer f.bg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		if !f.track(conn) {
			_ = conn.Close()
			continue
		}
		f.bg.Add(1)
		go func() {
			defer f.bg.Done()
			f.serveConn(ctx, conn)
		}()
	}
}

// track remembers a connection so that the end of Dial can cut it; false
// when too many are in handshake or the listener is closed.
func (f *former) track(conn net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln == nil || len(f.conns) >= maxHandshakes {
		return false
	}
	f.conns[conn] = struct{}{}
	return true
}

func (f *former) untrack(conn net.Conn) {
	f.mu.Lock()
	delete(f.conns, conn)
	f.mu.Unlock()
}

func (f *former) serveConn(ctx context.Context, conn net.Conn) {
	f.tune(conn)
	rank := f.cfg.Rank
	h, err := f.authenticate(ctx, conn, false, 0, func(p uint8, r int) bool {
		if p == purposeStore {
			return rank == 0 && r > 0
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return r > rank && f.peers[r].Conn == nil
	})
	if err != nil {
		f.untrack(conn)
		_ = conn.Close()
		select {
		case <-f.stop:
		default:
			if f.cfg.Logf != nil {
				f.cfg.Logf("%s: rank %d refused a connection from %v: %v", f.cfg.Backend, rank, conn.RemoteAddr(), err)
			}
		}
		return
	}
	if h.purpose == purposePeer {
		lc, err := f.upgrade(ctx, conn, int(h.rank), false)
		f.untrack(conn)
		if err != nil {
			_ = conn.Close()
			f.fail(fmt.Errorf("link to rank %d: %w", h.rank, err))
			return
		}
		if !f.addPeer(int(h.rank), lc, h) {
			_ = lc.Close()
		}
		return
	}
	defer f.untrack(conn)
	defer conn.Close()
	f.store.serve(ctx, conn, int(h.rank), f.stop, f.wait.Summary)
}
