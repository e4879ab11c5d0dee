package conformance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
)

// lostBound is how long a survivor may take to see that a peer left, and
// a request to complete once its peer has taken part: well within a case's
// Timeout, so that the failure says which rule was broken before the
// case's context ends.
const lostBound = 5 * time.Second

// TestComm checks that the groups newGroup makes keep the comm.Comm
// contract — matching, wildcards and the order in which posted receives
// take messages, non-overtaking, truncation, cancellation, how requests
// report completion (Test, comm.WaitAll, comm.Await), Close and lost peers
// — that every blocking call (Send, Recv, comm.Blocking's where the
// communicator has it, Request.Wait, the collectives) returns ctx.Err()
// promptly when its context is done or ends while it waits, and leaves the
// communicator usable, and that every collective of package comm (Barrier,
// Bcast, Reduce, Allreduce, Gather, Scatter, Allgather, Alltoall,
// ReduceScatter) gives the result of a sequential computation over groups
// of 1 to MaxRanks ranks, natively (comm.Collectives) or through the shared
// algorithms. The "algorithms" cases run the collectives whose shared
// algorithm depends on the size at sizes on both sides of each threshold
// of package comm, as comm itself chooses, over 2, 3 and 4 ranks.
//
// A case that times out says which rule the backend most likely broke,
// and where docs/backend-guide.md explains it.
//
// newGroup(t, n) returns the n ranks of a fresh group, rank i at index i:
// in-process ranks, or in-process endpoints of a multi-process transport.
// It may call t.Skip for a size it cannot make. The suite drives each rank
// from its own goroutine, closes every rank when the case ends (so Close
// must be safe to call again), and buffers are Go memory
// (memspace.FromSlice). The "no-leak" case checks that no goroutine
// outlives a closed group, so it must not run beside tests that start
// goroutines of their own. TestCommRank checks the same requirements with
// one rank per process.
func TestComm(t *testing.T, newGroup func(t *testing.T, n int) []comm.Comm, opts ...Option) {
	t.Helper()
	s := newSuite(t, "comm", opts)
	defer s.finish(t)
	defer s.watchLeaks(t)()
	groupMode(t, s, groupFactory(newGroup), commCases(s.cfg))
}

// Reasons a case runs in TestComm only.
const (
	needsClose = "it closes a rank and watches what the rank, or its peers, see next; " +
		"closing a rank of the job would end the run. Run TestComm over in-process endpoints " +
		"of the transport, or the backend's own failure tests"
	needsGoroutines = "it counts the goroutines left once every rank of a group has closed, " +
		"which needs every rank in this process. Run TestComm over in-process endpoints " +
		"of the transport"
	needsCollCancel = "it cancels collectives on some ranks only, which leaves the group's collectives " +
		"out of step (package comm says to close such a group), and the ranks of a job get back in step " +
		"after each case with a collective. Run TestComm over in-process endpoints of the transport"
)

// commCases are the cases of both TestComm and TestCommRank, in order.
func commCases(cfg *config) []section {
	maxRanks := cfg.maxRanks
	all := make([]int, 0, maxRanks)
	for n := 1; n <= maxRanks; n++ {
		all = append(all, n)
	}
	var lost []int
	for _, n := range []int{2, 3, 4} {
		if n <= maxRanks {
			lost = append(lost, n)
		}
	}
	return []section{
		{"", []rankCase{
			{name: "group", ns: all, body: commShape, stall: ruleRanks},
		}},
		{"p2p", []rankCase{
			{name: "send-recv", ns: []int{2, 3}, capped: true, body: commSendRecv, stall: ruleDeliver},
			{name: "self", ns: []int{1, 2}, body: commSelf, stall: ruleDeliver},
			{name: "any-source", ns: []int{2, 3}, capped: true, body: commAnySource, stall: ruleAnySource},
			{name: "any-tag", ns: []int{2, 3}, capped: true, body: commAnyTag, stall: ruleAnyTag},
			{name: "non-overtaking", ns: []int{2, 3}, capped: true, body: commNonOvertaking, stall: ruleNonOvertaking},
			{name: "any-source-order", ns: []int{2}, span: 2, body: commAnySourceOrder, stall: rulePostedOrder},
			{name: "any-tag-order", ns: []int{2}, span: 2, body: commAnyTagOrder, stall: rulePostedOrder},
			{name: "truncated", ns: []int{2}, span: 2, body: commTruncated, stall: ruleTruncated},
			{name: "zero-length", ns: []int{2}, span: 2, body: commZeroLength, stall: ruleDeliver},
			{name: "invalid", ns: []int{2, 3}, body: commInvalid, stall: ruleInvalid}, // rank Size() is the first invalid one
			{name: "cancel", ns: []int{2}, span: 2, body: commCancel, stall: ruleCancel},
			{name: "wait-timeout", ns: []int{2}, span: 2, body: commWaitTimeout, stall: ruleContext},
			{name: "collective-isolation", ns: []int{2, 3}, body: commIsolation, stall: ruleAnyTag}, // collectives: every rank
		}},
		{"requests", []rankCase{
			{name: "test", ns: []int{2}, span: 2, body: reqTest, stall: ruleTest},
			{name: "wait-all", ns: []int{2}, span: 2, body: reqWaitAll, stall: ruleSettled},
			{name: "await", ns: []int{2}, span: 2, body: reqAwait, stall: ruleSettled},
		}},
		{"context", []rankCase{
			{name: "send", ns: []int{2}, span: 2, body: ctxSend, stall: ruleContext},
			{name: "recv", ns: []int{2}, span: 2, body: ctxRecv, stall: ruleContext},
			{name: "wait", ns: []int{2}, span: 2, body: ctxWait, stall: ruleContext},
			{name: "collectives", ns: ctxCollNs(maxRanks), groupOnly: needsCollCancel,
				group: func(c *tcase, g groupFactory, n int) { ctxColl(c, g.open(c, n)) }},
		}},
		{"close", []rankCase{
			{name: "closed", single: true, groupOnly: needsClose,
				group: func(c *tcase, g groupFactory, _ int) { commClosed(c, g.open(c, 2)) }},
			{name: "peer-lost", single: true, groupOnly: needsClose,
				group: func(c *tcase, g groupFactory, _ int) { commPeerLost(c, g.open(c, 3)) }},
			{name: "no-leak", single: true, groupOnly: needsGoroutines,
				group: func(c *tcase, g groupFactory, _ int) {
					noLeak(c)
					ranks := g.open(c, 3)
					runBody(c, ranks, ruleDeliver, commSendRecv)
					runBody(c, ranks, ruleCollective, commCollSmoke)
					closeAll(c, ranks)
				}},
		}},
		{"coll", []rankCase{
			{name: "barrier", ns: all, body: collBarrier, stall: ruleBarrier},
			{name: "bcast", ns: all, body: collBcast, stall: ruleCollective},
			{name: "reduce", ns: all, body: collReduce, stall: ruleCollective},
			{name: "allreduce", ns: all, body: collAllreduce, stall: ruleCollective},
			{name: "gather", ns: all, body: collGather, stall: ruleCollective},
			{name: "scatter", ns: all, body: collScatter, stall: ruleCollective},
			{name: "allgather", ns: all, body: collAllgather, stall: ruleCollective},
			{name: "alltoall", ns: all, body: collAlltoall, stall: ruleCollective},
			{name: "reduce-scatter", ns: all, body: collReduceScatter, stall: ruleCollective},
			{name: "invalid", ns: all[:min(3, len(all))], body: collInvalid, stall: ruleInvalid},
			{name: "peer-lost", ns: lost, groupOnly: needsClose,
				group: func(c *tcase, g groupFactory, n int) { collPeerLost(c, g.open(c, n)) }},
		}},
		{"flight", []rankCase{
			{name: "record", ns: []int{2, 3}, body: commFlight, stall: ruleFlight},
		}},
		{"algorithms", algCases(maxRanks)},
		{"onesided", oneSidedCases(cfg.regionSpaces)},
		{"device", deviceCases(cfg.deviceSpaces, maxRanks)},
	}
}

type groupFactory func(t *testing.T, n int) []comm.Comm

// open makes a group of n ranks, checks its shape and closes every rank
// when the case ends.
func (f groupFactory) open(c *tcase, n int) []comm.Comm {
	c.Helper()
	ranks := f(c.T, n)
	if len(ranks) != n {
		c.Fatalf("the factory made %d ranks when asked for a group of %d: it must return the n ranks of a group, rank i at index i", len(ranks), n)
	}
	for i, r := range ranks {
		if r == nil {
			c.Fatalf("rank %d of the factory's group of %d is nil", i, n)
		}
	}
	c.Cleanup(func() { closeAll(c, ranks) })
	return ranks
}

// closeAll closes every rank at once (a Close may wait for its peers).
func closeAll(c *tcase, ranks []comm.Comm) {
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = r.Close()
		}()
	}
	wg.Wait()
}

// runRanks runs body for every rank in its own goroutine and waits for all.
// The first failure cancels the context of the others; failures are
// reported with their rank, and a rank still waiting when the case's
// context ended with stall, the rule it most likely broke. It returns
// whether every rank succeeded.
func runRanks(c *tcase, ranks []comm.Comm, stall rule, body func(ctx context.Context, r int, cm comm.Comm) error) bool {
	c.Helper()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for r, cm := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := callBody(ctx, func(ctx context.Context, me, _ int, cm comm.Comm) error { return body(ctx, me, cm) }, r, len(ranks), cm)
			if err != nil {
				errs[r] = err
				cancel()
			}
		}()
	}
	wg.Wait()
	primary := false
	for _, err := range errs {
		if err != nil && !isCtxErr(err) {
			primary = true
		}
	}
	for r, err := range errs {
		switch {
		case err == nil:
		case primary && isCtxErr(err):
			c.Logf("rank %d of %d: %v (after another rank failed)", r, len(ranks), err)
		case isCtxErr(err) && c.ctx.Err() != nil && stall.text != "":
			c.Errorf("rank %d of %d: %v (the case's context ended while this rank waited; what it waited for never came: %v)",
				r, len(ranks), err, stall)
		default:
			c.Errorf("rank %d of %d: %v", r, len(ranks), err)
		}
	}
	return !c.Failed()
}

// blk returns the block viewing b (Go memory).
func blk(b []byte) memspace.Block {
	buf, err := memspace.FromSlice(b)
	if err != nil {
		panic(err) // []byte is always a valid element type
	}
	return buf.Block()
}

// checkStatus compares a status with what it should be.
func checkStatus(what string, st comm.Status, src, tag, count int) error {
	if st.Source != src || st.Tag != tag || st.Count != count {
		return fmt.Errorf("%s: status %+v, want {Source:%d Tag:%d Count:%d}", what, st, src, tag, count)
	}
	return nil
}

// shapeTag is the user tag of the group case.
const shapeTag = 50

// commShape checks that the ranks are numbered 0 to n-1, each once, and
// agree on the size: each tells the next around a ring who it is.
func commShape(ctx context.Context, me, n int, cm comm.Comm) error {
	if cm.Rank() != me || cm.Size() != n {
		return fmt.Errorf("Rank() = %d, Size() = %d, want rank %d of %d", cm.Rank(), cm.Size(), me, n)
	}
	next, prev := (me+1)%n, (me+n-1)%n
	out, in := make([]byte, 8), make([]byte, 8)
	binary.LittleEndian.PutUint32(out[0:], uint32(me))
	binary.LittleEndian.PutUint32(out[4:], uint32(n))
	st, err := comm.Sendrecv(ctx, cm, blk(out), next, shapeTag, blk(in), prev, shapeTag)
	if err != nil {
		return fmt.Errorf("telling rank %d who this is, around a ring: %w", next, err)
	}
	if err := checkStatus("the message from the previous rank around a ring", st, prev, shapeTag, 8); err != nil {
		return err
	}
	if r, s := binary.LittleEndian.Uint32(in[0:]), binary.LittleEndian.Uint32(in[4:]); int(r) != prev || int(s) != n {
		return fmt.Errorf("rank %d, the previous one around a ring, says it is rank %d of %d", prev, r, s)
	}
	return nil
}

// msgSizes are the lengths of the send-recv case: tiny, odd, and larger
// than the eager limit of most transports.
var msgSizes = []int{1, 13, 4096, 70001, 1<<20 + 7}

func commSendRecv(ctx context.Context, me, n int, cm comm.Comm) error {
	reqs, err := postMessages(me, n, cm)
	if err != nil {
		return err
	}
	if err := waitMessages(ctx, me, reqs); err != nil {
		return err
	}
	return sendRecvBlocking(ctx, me, n, cm)
}

// pendingMsg is a send or receive of commSendRecv, posted and not yet
// waited for.
type pendingMsg struct {
	req       comm.Request
	buf       []byte
	peer, tag int
	size      int
	send      bool
}

// postMessages posts, for every other rank, a receive then a send of each
// of msgSizes, the tag naming the size and the sender.
func postMessages(me, n int, cm comm.Comm) ([]pendingMsg, error) {
	var reqs []pendingMsg
	for peer := range n {
		if peer == me {
			continue
		}
		for k, size := range msgSizes {
			tag := k*64 + peer // tag names the size and the sender
			buf := make([]byte, size)
			r, err := cm.Irecv(blk(buf), peer, tag)
			if err != nil {
				return nil, fmt.Errorf("Irecv from %d tag %d: %w", peer, tag, err)
			}
			reqs = append(reqs, pendingMsg{req: r, buf: buf, peer: peer, tag: tag, size: size})
		}
	}
	for peer := range n {
		if peer == me {
			continue
		}
		for k, size := range msgSizes {
			tag := k*64 + me
			r, err := cm.Isend(blk(pattern(me*1000+peer*10+k, size)), peer, tag)
			if err != nil {
				return nil, fmt.Errorf("Isend to %d tag %d: %w", peer, tag, err)
			}
			reqs = append(reqs, pendingMsg{req: r, peer: peer, tag: tag, size: size, send: true})
		}
	}
	return reqs, nil
}

// waitMessages waits for each of reqs in turn, and checks its status and,
// for a receive, what it received.
func waitMessages(ctx context.Context, me int, reqs []pendingMsg) error {
	for _, p := range reqs {
		st, err := p.req.Wait(ctx)
		what := fmt.Sprintf("receive of %d bytes from %d tag %d", p.size, p.peer, p.tag)
		if p.send {
			what = fmt.Sprintf("send of %d bytes to %d tag %d", p.size, p.peer, p.tag)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := checkStatus(what, st, p.peer, p.tag, p.size); err != nil {
			return err
		}
		if !p.send {
			k := (p.tag - p.peer) / 64
			if d := diff(pattern(p.peer*1000+me*10+k, p.size), p.buf); d != "" {
				return fmt.Errorf("%s: %s", what, d)
			}
		}
	}
	return nil
}

// sendRecvBlocking is the part of commSendRecv with the blocking forms:
// Sendrecv around a ring, then Send from rank 0 to Recv on rank 1.
func sendRecvBlocking(ctx context.Context, me, n int, cm comm.Comm) error {
	next, prev := (me+1)%n, (me+n-1)%n
	in := make([]byte, 777)
	st, err := comm.Sendrecv(ctx, cm, blk(pattern(me+50, 777)), next, 5, blk(in), prev, 5)
	if err != nil {
		return fmt.Errorf("Sendrecv: %w", err)
	}
	if err := checkStatus("Sendrecv", st, prev, 5, 777); err != nil {
		return err
	}
	if d := diff(pattern(prev+50, 777), in); d != "" {
		return fmt.Errorf("Sendrecv: %s", d)
	}
	if me == 0 {
		if err := comm.Send(ctx, cm, blk(pattern(3, 99)), 1, 6); err != nil {
			return fmt.Errorf("Send: %w", err)
		}
	} else if me == 1 {
		in := make([]byte, 99)
		st, err := comm.Recv(ctx, cm, blk(in), 0, 6)
		if err != nil {
			return fmt.Errorf("Recv: %w", err)
		}
		if err := checkStatus("Recv", st, 0, 6, 99); err != nil {
			return err
		}
		if d := diff(pattern(3, 99), in); d != "" {
			return fmt.Errorf("Recv: %s", d)
		}
	}
	return nil
}

func commSelf(ctx context.Context, me, n int, cm comm.Comm) error {
	for k, size := range []int{1, 1000, 1 << 20} {
		want := pattern(me+k, size)
		sr, err := cm.Isend(blk(want), me, 3+k)
		if err != nil {
			return fmt.Errorf("Isend to itself: %w", err)
		}
		got := make([]byte, size)
		st, err := comm.Recv(ctx, cm, blk(got), me, 3+k)
		if err != nil {
			return fmt.Errorf("Recv from itself: %w", err)
		}
		if err := checkStatus("receive from itself", st, me, 3+k, size); err != nil {
			return err
		}
		if _, err := sr.Wait(ctx); err != nil {
			return fmt.Errorf("send to itself: %w", err)
		}
		if d := diff(want, got); d != "" {
			return fmt.Errorf("%d bytes to itself: %s", size, d)
		}
	}
	return nil
}

func commAnySource(ctx context.Context, me, n int, cm comm.Comm) error {
	if me != 0 {
		return comm.Send(ctx, cm, blk(pattern(me, 10+me)), 0, 7)
	}
	seen := map[int]bool{}
	for range n - 1 {
		buf := make([]byte, 64)
		st, err := comm.Recv(ctx, cm, blk(buf), comm.AnySource, 7)
		if err != nil {
			return fmt.Errorf("Recv(AnySource): %w", err)
		}
		src := st.Source
		if src <= 0 || src >= n || seen[src] {
			return fmt.Errorf("Recv(AnySource): Source %d is not a new sender of [1, %d): %v", src, n, ruleAnySource)
		}
		seen[src] = true
		if err := checkStatus("Recv(AnySource)", st, src, 7, 10+src); err != nil {
			return err
		}
		if d := diff(pattern(src, 10+src), buf[:st.Count]); d != "" {
			return fmt.Errorf("Recv(AnySource) from %d: %s", src, d)
		}
	}
	return nil
}

func commAnyTag(ctx context.Context, me, n int, cm comm.Comm) error {
	tags := []int{5, 9, 3, comm.MaxTag, 0}
	if me != 0 {
		var reqs []comm.Request
		for k, tag := range tags {
			r, err := cm.Isend(blk(pattern(me*10+k, 20+k)), 0, tag)
			if err != nil {
				return fmt.Errorf("Isend tag %d: %w", tag, err)
			}
			reqs = append(reqs, r)
		}
		return comm.WaitAll(ctx, reqs...)
	}
	// From each sender, AnyTag receives get the messages in send order.
	for src := 1; src < n; src++ {
		for k, tag := range tags {
			buf := make([]byte, 64)
			st, err := comm.Recv(ctx, cm, blk(buf), src, comm.AnyTag)
			if err != nil {
				return fmt.Errorf("Recv(%d, AnyTag): %w", src, err)
			}
			if err := checkStatus(fmt.Sprintf("receive #%d from %d with AnyTag", k+1, src), st, src, tag, 20+k); err != nil {
				return err
			}
			if d := diff(pattern(src*10+k, 20+k), buf[:st.Count]); d != "" {
				return fmt.Errorf("Recv(%d, AnyTag) #%d: %s", src, k+1, d)
			}
		}
	}
	return nil
}

func commNonOvertaking(ctx context.Context, me, n int, cm comm.Comm) error {
	const senders, msgs, window = 4, 60, 6
	if me != 0 {
		// Several goroutines per rank, each with its own tag, each posting
		// windows of sends before waiting for them.
		var wg sync.WaitGroup
		errs := make([]error, senders)
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tag := 100 + g
				for base := 0; base < msgs && errs[g] == nil; base += window {
					var reqs []comm.Request
					for seq := base; seq < min(base+window, msgs); seq++ {
						m := make([]byte, 12+seq%5)
						binary.LittleEndian.PutUint32(m[0:], uint32(seq))
						binary.LittleEndian.PutUint32(m[4:], uint32(me))
						binary.LittleEndian.PutUint32(m[8:], uint32(tag))
						r, err := cm.Isend(blk(m), 0, tag)
						if err != nil {
							errs[g] = fmt.Errorf("goroutine %d: Isend #%d: %w", g, seq, err)
							break
						}
						reqs = append(reqs, r)
					}
					if err := comm.WaitAll(ctx, reqs...); err != nil && errs[g] == nil {
						errs[g] = fmt.Errorf("goroutine %d: sends: %w", g, err)
					}
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	// Rank 0 posts windows of wildcard receives. Per (source, tag), the
	// sequence numbers must come in order, each exactly once.
	type key struct{ src, tag int }
	next := map[key]int{}
	total := (n - 1) * senders * msgs
	for got := 0; got < total; {
		k := min(16, total-got)
		bufs := make([][]byte, k)
		reqs := make([]comm.Request, k)
		for i := range k {
			bufs[i] = make([]byte, 32)
			r, err := cm.Irecv(blk(bufs[i]), comm.AnySource, comm.AnyTag)
			if err != nil {
				return fmt.Errorf("Irecv: %w", err)
			}
			reqs[i] = r
		}
		for i, r := range reqs {
			st, err := r.Wait(ctx)
			if err != nil {
				return fmt.Errorf("receive %d: %w", got+i, err)
			}
			m := bufs[i]
			seq := int(binary.LittleEndian.Uint32(m[0:]))
			src := int(binary.LittleEndian.Uint32(m[4:]))
			tag := int(binary.LittleEndian.Uint32(m[8:]))
			if st.Source != src || st.Tag != tag || st.Count != 12+seq%5 {
				return fmt.Errorf("receive %d: status %+v for message #%d of source %d tag %d", got+i, st, seq, src, tag)
			}
			kk := key{src, tag}
			if seq != next[kk] {
				return fmt.Errorf("from source %d with tag %d, message #%d arrived where #%d was due: messages of one (source, tag) were reordered or lost: %v",
					src, tag, seq, next[kk], ruleNonOvertaking)
			}
			next[kk]++
		}
		got += k
	}
	return nil
}

func commTruncated(ctx context.Context, me, n int, cm comm.Comm) error {
	if me == 1 {
		var reqs []comm.Request
		for _, m := range []struct{ size, tag int }{{100, 1}, {10, 1}, {200000, 2}, {30, 2}} {
			r, err := cm.Isend(blk(pattern(m.size, m.size)), 0, m.tag)
			if err != nil {
				return fmt.Errorf("Isend of %d bytes: %w", m.size, err)
			}
			reqs = append(reqs, r)
		}
		// How a send of a truncated message ends is the sender's business;
		// it must end.
		for _, r := range reqs {
			if _, err := r.Wait(ctx); isCtxErr(err) {
				return fmt.Errorf("send: %w", err)
			}
		}
		return nil
	}
	for _, m := range []struct{ size, tag, into int }{{100, 1, 50}, {10, 1, 50}, {200000, 2, 1000}, {30, 2, 1000}} {
		buf := make([]byte, m.into)
		st, err := comm.Recv(ctx, cm, blk(buf), 1, m.tag)
		if m.size > m.into {
			if !errors.Is(err, comm.ErrTruncated) {
				return fmt.Errorf("a %d-byte message into %d bytes: error %v, want ErrTruncated: %v", m.size, m.into, err, ruleTruncated)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("the message after a truncated one: %w", err)
		}
		if err := checkStatus("the message after a truncated one (the truncated one must be consumed)", st, 1, m.tag, m.size); err != nil {
			return fmt.Errorf("%w: %v", err, ruleTruncated)
		}
		if d := diff(pattern(m.size, m.size), buf[:m.size]); d != "" {
			return fmt.Errorf("the message after a truncated one: %s", d)
		}
	}
	return nil
}

func commZeroLength(ctx context.Context, me, n int, cm comm.Comm) error {
	if me == 1 {
		if err := comm.Send(ctx, cm, blk(nil), 0, 4); err != nil {
			return fmt.Errorf("Send of an empty message: %w", err)
		}
		return comm.Send(ctx, cm, blk(nil), 0, 4)
	}
	st, err := comm.Recv(ctx, cm, blk(nil), 1, 4)
	if err != nil {
		return fmt.Errorf("Recv of an empty message into an empty buffer: %w", err)
	}
	if err := checkStatus("empty message", st, 1, 4, 0); err != nil {
		return err
	}
	buf := pattern(1, 10)
	st, err = comm.Recv(ctx, cm, blk(buf), 1, 4)
	if err != nil {
		return fmt.Errorf("Recv of an empty message into 10 bytes: %w", err)
	}
	if err := checkStatus("empty message into 10 bytes", st, 1, 4, 0); err != nil {
		return err
	}
	if d := diff(pattern(1, 10), buf); d != "" {
		return fmt.Errorf("an empty message wrote into the buffer: %s", d)
	}
	return nil
}

func commInvalid(ctx context.Context, me, n int, cm comm.Comm) error {
	b := blk(make([]byte, 8))
	bad := func(what string, err error) error {
		if !errors.Is(err, comm.ErrInvalidArgument) {
			return fmt.Errorf("%s: error %v, want ErrInvalidArgument", what, err)
		}
		return nil
	}
	// The communicator's own refusals must say who refused: impl's
	// checks return errors without the backend's name, for the backend to
	// wrap (xerr.Op). A Comm has no name to look for, but impl's error
	// returned as it is shows the wrapping was forgotten.
	named := func(what string, err, bare error) error {
		if e := bad(what, err); e != nil {
			return e
		}
		if bare != nil && err.Error() == bare.Error() {
			return fmt.Errorf("%s: error %q does not name the backend that refused: impl's check returned as it is "+
				"(wrap it with xerr.Op(name, op, err))", what, err)
		}
		return nil
	}
	var errs []error
	for _, dest := range []int{-1, -2, n, n + 5, 1 << 40} {
		_, err := cm.Isend(b, dest, 1)
		errs = append(errs, named(fmt.Sprintf("Isend to rank %d of %d", dest, n), err, impl.CheckRank(dest, n, false)))
	}
	for _, src := range []int{-2, n, 1 << 40} {
		_, err := cm.Irecv(b, src, 1)
		errs = append(errs, named(fmt.Sprintf("Irecv from rank %d of %d", src, n), err, impl.CheckRank(src, n, true)))
	}
	other := (me + 1) % n
	for _, tag := range []int{-1, -2, comm.MaxReservedTag + 1} {
		_, err := cm.Isend(b, other, tag)
		errs = append(errs, named(fmt.Sprintf("Isend with tag %d", tag), err, impl.CheckWireTag(tag, false)))
	}
	for _, tag := range []int{-2, comm.MaxReservedTag + 1} {
		_, err := cm.Irecv(b, other, tag)
		errs = append(errs, named(fmt.Sprintf("Irecv with tag %d", tag), err, impl.CheckWireTag(tag, true)))
	}
	errs = append(errs, bad("Send with a reserved tag", comm.Send(ctx, cm, b, other, comm.MaxTag+1)))
	_, err := comm.Recv(ctx, cm, b, other, comm.MaxTag+1)
	errs = append(errs, bad("Recv with a reserved tag", err))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Still usable: a ring exchange.
	in := make([]byte, 8)
	_, err = comm.Sendrecv(ctx, cm, blk(pattern(me, 8)), (me+1)%n, 2, blk(in), (me+n-1)%n, 2)
	if err != nil {
		return fmt.Errorf("Sendrecv after invalid calls: %w", err)
	}
	if d := diff(pattern((me+n-1)%n, 8), in); d != "" {
		return fmt.Errorf("Sendrecv after invalid calls: %s", d)
	}
	return nil
}

// signal sends an empty message with tag to dest, to order the ranks.
func signal(ctx context.Context, cm comm.Comm, dest, tag int) error {
	return comm.Send(ctx, cm, blk(nil), dest, tag)
}

// await receives an empty message with tag from src.
func await(ctx context.Context, cm comm.Comm, src, tag int) error {
	_, err := comm.Recv(ctx, cm, blk(nil), src, tag)
	return err
}

func commCancel(ctx context.Context, me, n int, cm comm.Comm) error {
	if me == 0 {
		buf := make([]byte, 16)
		if err := cancelUnmatchedRecv(ctx, cm, buf); err != nil {
			return err
		}
		if err := cancelCompletedRecv(ctx, cm, buf); err != nil {
			return err
		}
		return cancelSend(ctx, cm)
	}
	return cancelPeer(ctx, cm)
}

// cancelUnmatchedRecv is rank 0's part of commCancel: a receive from rank
// 1 no message matches, canceled, then the message rank 1 sends after the
// cancel received into buf.
func cancelUnmatchedRecv(ctx context.Context, cm comm.Comm, buf []byte) error {
	// A receive no message matches.
	r, err := cm.Irecv(blk(buf), 1, 3)
	if err != nil {
		return err
	}
	if _, done, err := r.Test(); done {
		return fmt.Errorf("Test of a receive nothing was sent to: done, error %v", err)
	}
	if err := r.Cancel(); err != nil {
		return fmt.Errorf("Cancel: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, lostBound)
	_, err = r.Wait(wctx)
	cancel()
	if !errors.Is(err, comm.ErrCanceled) {
		return fmt.Errorf("Wait of a canceled receive: error %v, want ErrCanceled within %v: %v", err, lostBound, ruleCancel)
	}
	if _, done, err := r.Test(); !done || !errors.Is(err, comm.ErrCanceled) {
		return fmt.Errorf("Test of a canceled receive: done %v, error %v", done, err)
	}
	if err := signal(ctx, cm, 1, 20); err != nil {
		return err
	}
	// The message sent after the cancel is not lost to it.
	st, err := comm.Recv(ctx, cm, blk(buf), 1, 3)
	if err != nil {
		return fmt.Errorf("Recv after a canceled receive: %w", err)
	}
	if err := checkStatus("Recv after a canceled receive", st, 1, 3, 16); err != nil {
		return err
	}
	if d := diff(pattern(33, 16), buf); d != "" {
		return fmt.Errorf("Recv after a canceled receive: %s", d)
	}
	return nil
}

// cancelCompletedRecv is rank 0's part of commCancel: a receive canceled
// once it completed.
func cancelCompletedRecv(ctx context.Context, cm comm.Comm, buf []byte) error {
	// Cancel after completion changes nothing.
	r2, err := cm.Irecv(blk(buf), 1, 4)
	if err != nil {
		return err
	}
	st, err := r2.Wait(ctx)
	if err != nil {
		return err
	}
	if err := r2.Cancel(); err != nil {
		return fmt.Errorf("Cancel of a completed receive: %w", err)
	}
	st2, err := r2.Wait(ctx)
	if err != nil || st2 != st {
		return fmt.Errorf("Wait after Cancel of a completed receive: %+v, %v; want %+v, nil", st2, err, st)
	}
	return nil
}

// cancelSend is rank 0's part of commCancel: a send to rank 1, canceled,
// then whether it was withdrawn, and a message after it.
func cancelSend(ctx context.Context, cm comm.Comm) error {
	// A canceled send either completed or was withdrawn: rank 1 sees
	// which, through non-overtaking.
	sr, err := cm.Isend(blk(pattern(7, 1<<20)), 1, 5)
	if err != nil {
		return err
	}
	if err := sr.Cancel(); err != nil {
		return fmt.Errorf("Cancel of a send: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, lostBound)
	_, err = sr.Wait(wctx)
	cancel()
	withdrawn := errors.Is(err, comm.ErrCanceled)
	if err != nil && !withdrawn {
		return fmt.Errorf("Wait of a canceled send: error %v, want nil or ErrCanceled within %v: %v", err, lostBound, ruleCancel)
	}
	flag := []byte{0}
	if withdrawn {
		flag[0] = 1
	}
	if err := comm.Send(ctx, cm, blk(flag), 1, 21); err != nil {
		return err
	}
	return comm.Send(ctx, cm, blk(pattern(8, 100)), 1, 5)
}

// cancelPeer is the other rank's part of commCancel: it sends what rank
// 0's receives get, and receives what its canceled send left.
func cancelPeer(ctx context.Context, cm comm.Comm) error {
	if err := await(ctx, cm, 0, 20); err != nil {
		return err
	}
	if err := comm.Send(ctx, cm, blk(pattern(33, 16)), 0, 3); err != nil {
		return err
	}
	if err := comm.Send(ctx, cm, blk(pattern(34, 16)), 0, 4); err != nil {
		return err
	}
	flag := []byte{0}
	if _, err := comm.Recv(ctx, cm, blk(flag), 0, 21); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	st, err := comm.Recv(ctx, cm, blk(buf), 0, 5)
	if err != nil {
		return err
	}
	if flag[0] == 1 {
		if err := checkStatus("the message after a withdrawn send", st, 0, 5, 100); err != nil {
			return fmt.Errorf("%w (a send whose Wait said ErrCanceled was delivered)", err)
		}
		return nil
	}
	if err := checkStatus("a send completed despite Cancel", st, 0, 5, 1<<20); err != nil {
		return err
	}
	_, err = comm.Recv(ctx, cm, blk(buf), 0, 5)
	return err
}

func commWaitTimeout(ctx context.Context, me, n int, cm comm.Comm) error {
	if me == 1 {
		if err := await(ctx, cm, 0, 20); err != nil {
			return err
		}
		return comm.Send(ctx, cm, blk(pattern(12, 40)), 0, 8)
	}
	buf := make([]byte, 40)
	r, err := cm.Irecv(blk(buf), 1, 8)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 0)
	defer cancel()
	<-dctx.Done()
	if _, err := r.Wait(dctx); !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("Wait with an expired deadline: error %v, want context.DeadlineExceeded: %v", err, ruleContext)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := r.Wait(cctx); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("Wait with a canceled context: error %v, want context.Canceled: %v", err, ruleContext)
	}
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer tcancel()
	if _, err := r.Wait(tctx); !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("Wait past a deadline: error %v, want context.DeadlineExceeded: %v", err, ruleContext)
	}
	if _, done, err := r.Test(); done {
		return fmt.Errorf("the receive completed (error %v) although nothing was sent: Wait must leave a request pending when its context ends", err)
	}
	// The request is still pending and completes once the message comes.
	if err := signal(ctx, cm, 1, 20); err != nil {
		return err
	}
	st, err := r.Wait(ctx)
	if err != nil {
		return fmt.Errorf("Wait after timed-out Waits: %w", err)
	}
	if err := checkStatus("receive after timed-out Waits", st, 1, 8, 40); err != nil {
		return err
	}
	if d := diff(pattern(12, 40), buf); d != "" {
		return fmt.Errorf("receive after timed-out Waits: %s", d)
	}
	return nil
}

func commIsolation(ctx context.Context, me, n int, cm comm.Comm) error {
	const wire = comm.MaxReservedTag // no collective of package comm uses it
	var user, reserved comm.Request
	var err error
	switch me {
	case 0:
		if user, err = cm.Irecv(blk(make([]byte, 64)), comm.AnySource, comm.AnyTag); err != nil {
			return err
		}
	case 1:
		// A message with a reserved tag, sent before the collectives: the
		// AnyTag receive must not take it either.
		if reserved, err = cm.Isend(blk(pattern(1, 5)), 0, wire); err != nil {
			return fmt.Errorf("Isend with a reserved tag: %w", err)
		}
	}
	if err := commCollOnce(ctx, cm); err != nil {
		return err
	}
	switch me {
	case 0:
		if st, done, err := user.Test(); done {
			return fmt.Errorf("a user receive with AnyTag matched collective or reserved-tag traffic: %+v, %v: %v", st, err, ruleAnyTag)
		}
		// Reserved tags are carried like any other at the byte level
		// (comm.Recv, for users, refuses them).
		in := make([]byte, 5)
		r, err := cm.Irecv(blk(in), 1, wire)
		if err != nil {
			return fmt.Errorf("Irecv with a reserved tag: %w", err)
		}
		st, err := r.Wait(ctx)
		if err != nil {
			return fmt.Errorf("receive with a reserved tag: %w", err)
		}
		if err := checkStatus("receive with a reserved tag", st, 1, wire, 5); err != nil {
			return err
		}
		if err := signal(ctx, cm, 1, 31); err != nil {
			return err
		}
		st, err = user.Wait(ctx)
		if err != nil {
			return fmt.Errorf("the user AnyTag receive: %w", err)
		}
		return checkStatus("the user AnyTag receive", st, 1, 9, 3)
	case 1:
		if _, err := reserved.Wait(ctx); err != nil {
			return err
		}
		if err := await(ctx, cm, 0, 31); err != nil {
			return err
		}
		return comm.Send(ctx, cm, blk(pattern(2, 3)), 0, 9)
	}
	return nil
}

// commCollOnce runs a few collectives on every rank.
func commCollOnce(ctx context.Context, cm comm.Comm) error {
	if err := comm.Barrier(ctx, cm); err != nil {
		return fmt.Errorf("Barrier: %w", err)
	}
	b, err := memspace.FromSlice(make([]int64, 100))
	if err != nil {
		return err
	}
	if err := comm.Bcast(ctx, cm, b, 0); err != nil {
		return fmt.Errorf("Bcast: %w", err)
	}
	if err := comm.Allreduce(ctx, cm, b, b, comm.Sum); err != nil {
		return fmt.Errorf("Allreduce: %w", err)
	}
	return comm.Barrier(ctx, cm)
}

// commCollSmoke runs commCollOnce: a body that checks only that the
// collectives complete.
func commCollSmoke(ctx context.Context, _, _ int, cm comm.Comm) error { return commCollOnce(ctx, cm) }

func commClosed(c *tcase, ranks []comm.Comm) {
	cm := ranks[0]
	buf := make([]byte, 8)
	pending, err := cm.Irecv(blk(buf), 1, 5)
	if err != nil {
		c.Fatalf("Irecv from rank 1: %v", err)
	}
	if err := cm.Close(); err != nil {
		c.Errorf("Close: %v (Close always returns; nil unless releasing something failed)", err)
	}
	wctx, cancel := c.within(lostBound)
	defer cancel()
	wantClosed := func(what string, err error) {
		c.Helper()
		switch {
		case errors.Is(err, comm.ErrClosed):
		case err == nil:
			c.Errorf("%s succeeded: %v", what, ruleClosed)
		case isCtxErr(err):
			c.Errorf("%s did not return within %v: %v", what, lostBound, ruleClosed)
		default:
			c.Errorf("%s: %v, want an error matching ErrClosed: %v", what, err, ruleClosed)
		}
	}
	_, err = pending.Wait(wctx)
	wantClosed("a receive pending at Close", err)
	// The error may come from the call or from the request's Wait.
	settle := func(r comm.Request, err error) error {
		if err != nil {
			return err
		}
		_, err = r.Wait(wctx)
		return err
	}
	wantClosed("Isend after Close", settle(cm.Isend(blk(buf), 1, 5)))
	wantClosed("Irecv after Close", settle(cm.Irecv(blk(buf), 1, 5)))
	wantClosed("Send after Close", comm.Send(wctx, cm, blk(buf), 1, 5))
	wantClosed("Barrier after Close", comm.Barrier(wctx, cm))
	_ = cm.Close() // a second Close returns
}

func commPeerLost(c *tcase, ranks []comm.Comm) {
	const gone = 2
	runRanks(c, ranks, rulePeerLost, func(ctx context.Context, me int, cm comm.Comm) error {
		if me == gone {
			// Wait until the survivors have posted their operations, then leave.
			for _, r := range []int{0, 1} {
				if err := await(ctx, cm, r, 40); err != nil {
					return err
				}
			}
			return cm.Close()
		}
		buf := make([]byte, 16)
		recv, err := cm.Irecv(blk(buf), gone, 5)
		if err != nil {
			return err
		}
		send, err := cm.Isend(blk(pattern(me, 1<<20)), gone, 6)
		if err != nil {
			return err
		}
		if err := signal(ctx, cm, gone, 40); err != nil {
			return err
		}
		bctx, cancel := context.WithTimeout(ctx, lostBound)
		defer cancel()
		if _, err := recv.Wait(bctx); !errors.Is(err, comm.ErrPeerLost) {
			return fmt.Errorf("a receive from rank %d pending when it closed: error %v, want ErrPeerLost within %v: %v", gone, err, lostBound, rulePeerLost)
		}
		if _, err := send.Wait(bctx); err != nil && !errors.Is(err, comm.ErrPeerLost) {
			return fmt.Errorf("a send to rank %d pending when it closed: error %v, want nil (delivered) or ErrPeerLost within %v: %v", gone, err, lostBound, rulePeerLost)
		}
		if r, err := cm.Irecv(blk(buf), gone, 5); err == nil {
			_, err = r.Wait(bctx)
			if !errors.Is(err, comm.ErrPeerLost) {
				return fmt.Errorf("a receive from rank %d posted after it closed: error %v, want ErrPeerLost: %v", gone, err, rulePeerLost)
			}
		} else if !errors.Is(err, comm.ErrPeerLost) {
			return fmt.Errorf("Irecv from rank %d after it closed: error %v, want ErrPeerLost: %v", gone, err, rulePeerLost)
		}
		if r, err := cm.Isend(blk(buf), gone, 5); err == nil {
			_, err = r.Wait(bctx)
			if !errors.Is(err, comm.ErrPeerLost) {
				return fmt.Errorf("a send to rank %d posted after it closed: error %v, want ErrPeerLost: %v", gone, err, rulePeerLost)
			}
		} else if !errors.Is(err, comm.ErrPeerLost) {
			return fmt.Errorf("Isend to rank %d after it closed: error %v, want ErrPeerLost: %v", gone, err, rulePeerLost)
		}
		// The survivors still talk to each other.
		other := 1 - me
		in := make([]byte, 32)
		if _, err := comm.Sendrecv(ctx, cm, blk(pattern(me, 32)), other, 7, blk(in), other, 7); err != nil {
			return fmt.Errorf("survivors' exchange: %w", err)
		}
		if d := diff(pattern(other, 32), in); d != "" {
			return fmt.Errorf("survivors' exchange: %s", d)
		}
		return nil
	})
}
