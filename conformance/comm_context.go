package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/collalg"
	"github.com/xpu-go/xpu/memspace"
)

// The "context" cases: every blocking call of a communicator — Send and
// Recv, the package's and comm.Blocking's own where the communicator has
// them, Request.Wait and the collectives — called with a context already
// done, and with one that ends while the call waits, returns an error
// matching ctx.Err() within promptBound, and leaves the communicator
// usable. A call that ignores its context is reported within promptBound
// of the context's end, then released (its peer takes part after all, or
// the group is closed) so that the case ends.

// ctxBig is the size of the sends that must wait for their receive: larger
// than the eager limit of the repository's transports (64 KiB) and of most
// others. A transport that buffers it may complete such a send: the cases
// accept that, and check the message arrives.
const ctxBig = 1<<20 + 5

// ctxEnds is how long the contexts that end while a call waits last.
const ctxEnds = 30 * time.Millisecond

// Flags a rank sends its peer after a call it was testing returned, or not.
const (
	flagReturned byte = iota // the call returned ctx.Err(): go on
	flagNil                  // the call returned nil (a send: it completed)
	flagHung                 // the call has not returned: take part so that it does
	flagStop                 // the case failed: stop
)

// ctxVariant is one way a call meets its context's end.
type ctxVariant struct {
	name     string // the call, as failures name it
	blocking bool   // call comm.Blocking's method rather than the package's function
	ends     bool   // the context ends while the call waits; else it is done already
	source   int    // the source of a receive
}

// ctxFor returns the context of variant v, derived from ctx.
func (v ctxVariant) ctxFor(ctx context.Context) (context.Context, context.CancelFunc) {
	if v.ends {
		return context.WithTimeout(ctx, ctxEnds)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	return cctx, cancel
}

func (v ctxVariant) String() string {
	if v.ends {
		return v.name + " whose context ends while it waits"
	}
	return v.name + " with a context already done"
}

// ctxVariants returns the variants of Send (or Recv) that cm offers.
func ctxVariants(cm comm.Comm, call string, sources ...int) []ctxVariant {
	_, blocking := comm.As[comm.Blocking](cm)
	var vs []ctxVariant
	for _, b := range []bool{false, true} {
		if b && !blocking {
			continue
		}
		name := "comm." + call
		if b {
			name = fmt.Sprintf("%T's %s (comm.Blocking)", blockingOf(cm), call)
		}
		for _, ends := range []bool{false, true} {
			vs = append(vs, ctxVariant{name: name, blocking: b, ends: ends, source: 1})
		}
	}
	for _, src := range sources {
		vs = append(vs, ctxVariant{name: "comm." + call + " from AnySource", ends: true, source: src})
	}
	return vs
}

func blockingOf(cm comm.Comm) comm.Blocking {
	b, _ := comm.As[comm.Blocking](cm)
	return b
}

// Tags of the context cases: variant i uses ctxTag+i for its message and
// ctxSig+i for the flag.
const (
	ctxTag = 300
	ctxSig = 340
)

// sendFlag tells peer how a call went.
func sendFlag(ctx context.Context, cm comm.Comm, peer, tag int, flag byte) error {
	if err := comm.Send(ctx, cm, blk([]byte{flag}), peer, tag); err != nil {
		return fmt.Errorf("telling rank %d how the call went: %w", peer, err)
	}
	return nil
}

// recvFlag receives how the peer's call went.
func recvFlag(ctx context.Context, cm comm.Comm, peer, tag int) (byte, error) {
	f := []byte{0xff}
	if _, err := comm.Recv(ctx, cm, blk(f), peer, tag); err != nil {
		return 0, fmt.Errorf("learning from rank %d how its call went: %w", peer, err)
	}
	return f[0], nil
}

// ctxSend: rank 0 sends ctxBig bytes to rank 1, which does not receive
// them yet, with a context done or ending; the send returns ctx.Err() (or
// nil, had it completed). Rank 1 then receives, and a probe sent after
// shows whether the send was withdrawn: it is the first message rank 1 gets
// unless the send went (which a nil return requires).
func ctxSend(ctx context.Context, me, n int, cm comm.Comm) error {
	for i, v := range ctxVariants(cm, "Send") {
		tag, sig := ctxTag+i, ctxSig+i
		if me == 1 {
			stop, err := ctxSendPeer(ctx, cm, v, tag, sig)
			if stop || err != nil {
				return err
			}
			continue
		}
		big := pattern(i, ctxBig)
		cctx, cancel := v.ctxFor(ctx)
		p := startPrompt(func() error {
			if v.blocking {
				return blockingOf(cm).Send(cctx, blk(big), 1, tag)
			}
			return comm.Send(cctx, cm, blk(big), 1, tag)
		})
		o := p.await(cctx)
		cancel()
		verdict := ctxVerdict(fmt.Sprintf("%v (%d bytes to rank 1, which has not posted its receive)", v, ctxBig), o, true)
		flag := flagReturned
		switch {
		case !o.returned:
			flag = flagHung
		case o.err == nil:
			flag = flagNil
		}
		if err := sendFlag(ctx, cm, 1, sig, flag); err != nil {
			return err
		}
		if !o.returned {
			return fmt.Errorf("%s (once rank 1 received, it returned %v)", verdict, p.join(ctx))
		}
		if err := comm.Send(ctx, cm, blk(pattern(50+i, 7)), 1, tag); err != nil {
			return fmt.Errorf("the probe after %v: %w", v, err)
		}
		if verdict != "" {
			return errors.New(verdict)
		}
	}
	return nil
}

// ctxSendPeer is rank 1's part of one variant of ctxSend. stop says that
// rank 0 failed and this rank's part is over.
func ctxSendPeer(ctx context.Context, cm comm.Comm, v ctxVariant, tag, sig int) (stop bool, err error) {
	flag, err := recvFlag(ctx, cm, 0, sig)
	if err != nil {
		return true, err
	}
	in := make([]byte, ctxBig)
	st, err := comm.Recv(ctx, cm, blk(in), 0, tag)
	if err != nil {
		return true, fmt.Errorf("receiving after %v: %w", v, err)
	}
	if flag == flagHung {
		return true, nil // rank 0 reports it
	}
	switch st.Count {
	case ctxBig: // the send went, or is still going (a backend that cannot cancel it)
		if d := diff(pattern(int(tag-ctxTag), ctxBig), in); d != "" {
			return true, fmt.Errorf("the message of %v: %s", v, d)
		}
		st, err = comm.Recv(ctx, cm, blk(in), 0, tag)
		if err != nil {
			return true, fmt.Errorf("the probe after %v: %w", v, err)
		}
		if st.Count != 7 {
			return true, fmt.Errorf("the probe after %v: %d bytes, want 7", v, st.Count)
		}
	case 7:
		if flag == flagNil {
			return true, fmt.Errorf("%v returned nil (sent), but its message never came: the probe sent after it came first: %v", v, ruleContext)
		}
	default:
		return true, fmt.Errorf("after %v, a message of %d bytes came with its tag; want %d (the send) or 7 (the probe)", v, st.Count, ctxBig)
	}
	if d := diff(pattern(50+int(tag-ctxTag), 7), in[:7]); d != "" {
		return true, fmt.Errorf("the probe after %v: %s", v, d)
	}
	return false, nil
}

// ctxRecv: rank 0 receives from rank 1, which sends nothing yet, with a
// context done or ending; the receive returns ctx.Err(). Rank 1 then sends
// a message, which a new receive must get: the first was withdrawn.
func ctxRecv(ctx context.Context, me, n int, cm comm.Comm) error {
	for i, v := range ctxVariants(cm, "Recv", comm.AnySource) {
		tag, sig := ctxTag+i, ctxSig+i
		if me == 1 {
			flag, err := recvFlag(ctx, cm, 0, sig)
			if err != nil || flag == flagStop {
				return err
			}
			if err := comm.Send(ctx, cm, blk(pattern(70+i, 40)), 0, tag); err != nil {
				return fmt.Errorf("the message after %v: %w", v, err)
			}
			if flag == flagHung {
				return nil
			}
			continue
		}
		buf := make([]byte, 64)
		cctx, cancel := v.ctxFor(ctx)
		p := startPrompt(func() error {
			var err error
			if v.blocking {
				_, err = blockingOf(cm).Recv(cctx, blk(buf), v.source, tag)
			} else {
				_, err = comm.Recv(cctx, cm, blk(buf), v.source, tag)
			}
			return err
		})
		o := p.await(cctx)
		cancel()
		verdict := ctxVerdict(fmt.Sprintf("%v (from rank 1, which sends nothing yet)", v), o, false)
		flag := flagReturned
		switch {
		case !o.returned:
			flag = flagHung
		case verdict != "":
			flag = flagStop
		}
		if err := sendFlag(ctx, cm, 1, sig, flag); err != nil {
			return err
		}
		if !o.returned {
			return fmt.Errorf("%s (once rank 1 sent, it returned %v)", verdict, p.join(ctx))
		}
		if verdict != "" {
			return errors.New(verdict)
		}
		rctx, rcancel := context.WithTimeout(ctx, promptBound)
		st, err := comm.Recv(rctx, cm, blk(buf), v.source, tag)
		expired := rctx.Err() != nil && ctx.Err() == nil
		rcancel()
		if err != nil {
			if expired {
				return fmt.Errorf("the message rank 1 sent after %v returned did not come to the next Recv within %v: "+
					"the abandoned receive took it: %v", v, promptBound, ruleCtxWithdraw)
			}
			return fmt.Errorf("the Recv after %v: %w", v, err)
		}
		if err := checkStatus(fmt.Sprintf("the Recv after %v", v), st, 1, tag, 40); err != nil {
			return err
		}
		if d := diff(pattern(70+i, 40), buf[:40]); d != "" {
			return fmt.Errorf("the Recv after %v: %s", v, d)
		}
	}
	return nil
}

// ctxWait: rank 0 waits, with contexts done and ending, for a receive
// nothing is sent to and a send of ctxBig bytes rank 1 does not receive
// yet. Each Wait returns ctx.Err() and leaves its request pending; once
// rank 1 takes part, both complete.
func ctxWait(ctx context.Context, me, n int, cm comm.Comm) error {
	if me == 1 {
		return ctxWaitPeer(ctx, cm)
	}
	buf := make([]byte, 40)
	rr, err := cm.Irecv(blk(buf), 1, ctxWaitRtag)
	if err != nil {
		return fmt.Errorf("Irecv: %w", err)
	}
	sr, err := cm.Isend(blk(pattern(6, ctxBig)), 1, ctxWaitStag)
	if err != nil {
		return fmt.Errorf("Isend of %d bytes: %w", ctxBig, err)
	}
	if err := ctxWaitEnding(ctx, cm, rr, sr); err != nil {
		return err
	}
	if _, done, err := rr.Test(); done {
		_ = sendFlag(ctx, cm, 1, ctxWaitSig, flagStop)
		return fmt.Errorf("the receive was done (error %v) after Waits whose context ended, though nothing was sent: "+
			"Wait must leave a request pending when its context ends", err)
	}
	if err := sendFlag(ctx, cm, 1, ctxWaitSig, flagReturned); err != nil {
		return err
	}
	st, err := rr.Wait(ctx)
	if err != nil {
		return fmt.Errorf("the receive, once rank 1 sent: %w", err)
	}
	if err := checkStatus("the receive, once rank 1 sent", st, 1, ctxWaitRtag, 40); err != nil {
		return err
	}
	if d := diff(pattern(5, 40), buf); d != "" {
		return fmt.Errorf("the receive, once rank 1 sent: %s", d)
	}
	if _, err := sr.Wait(ctx); err != nil {
		return fmt.Errorf("the send, once rank 1 received: %w", err)
	}
	return nil
}

// The tags of ctxWait: of the receive, of the send, and of the flag rank 0
// sends rank 1.
const ctxWaitRtag, ctxWaitStag, ctxWaitSig = 320, 321, 322

// ctxWaitPeer is rank 1's part of ctxWait: told to go on, it sends to the
// pending receive and receives the pending send.
func ctxWaitPeer(ctx context.Context, cm comm.Comm) error {
	flag, err := recvFlag(ctx, cm, 0, ctxWaitSig)
	if err != nil || flag == flagStop {
		return err
	}
	if err := comm.Send(ctx, cm, blk(pattern(5, 40)), 0, ctxWaitRtag); err != nil {
		return fmt.Errorf("sending to the pending receive: %w", err)
	}
	in := make([]byte, ctxBig)
	st, err := comm.Recv(ctx, cm, blk(in), 0, ctxWaitStag)
	if err != nil {
		return fmt.Errorf("receiving the pending send: %w", err)
	}
	if err := checkStatus("the pending send", st, 0, ctxWaitStag, ctxBig); err != nil {
		return err
	}
	if d := diff(pattern(6, ctxBig), in); d != "" {
		return fmt.Errorf("the pending send: %s", d)
	}
	return nil
}

// ctxWaitEnding is rank 0's Waits, with contexts done and ending, for the
// pending receive rr and send sr. On the first that does not return
// ctx.Err() promptly, it tells rank 1 to stop (or, when the Wait hung, to
// take part so that it returns), and returns what went wrong.
func ctxWaitEnding(ctx context.Context, cm comm.Comm, rr, sr comm.Request) error {
	for _, q := range []struct {
		what string
		r    comm.Request
		ok   bool
	}{
		{"of a receive from rank 1, which sends nothing yet", rr, false},
		{fmt.Sprintf("of a send of %d bytes to rank 1, which has not posted its receive", ctxBig), sr, true},
	} {
		for _, ends := range []bool{false, true} {
			v := ctxVariant{name: "Wait", ends: ends}
			cctx, cancel := v.ctxFor(ctx)
			p := startPrompt(func() error { _, err := q.r.Wait(cctx); return err })
			o := p.await(cctx)
			cancel()
			if verdict := ctxVerdict(fmt.Sprintf("%v (%s)", v, q.what), o, q.ok); verdict != "" {
				flag := flagStop
				if !o.returned {
					flag = flagHung
				}
				if err := sendFlag(ctx, cm, 1, ctxWaitSig, flag); err != nil {
					return err
				}
				if !o.returned {
					return fmt.Errorf("%s (once rank 1 took part, it returned %v)", verdict, p.join(ctx))
				}
				return errors.New(verdict)
			}
		}
	}
	return nil
}

// ctxCollCount is the element count of the collectives of ctxColl.
const ctxCollCount = 5

// ctxCollCall calls collective coll once on this rank, with small buffers,
// rooted at root.
func ctxCollCall(ctx context.Context, coll collalg.Coll, cm comm.Comm, root int) error {
	n, k := cm.Size(), ctxCollCount
	f := func(m int) *memspace.Buffer[float64] { return view(make([]float64, m)) }
	me := cm.Rank()
	rootOnly := func(m int) *memspace.Buffer[float64] {
		if me == root {
			return f(m)
		}
		return nil
	}
	switch coll {
	case collalg.Barrier:
		return comm.Barrier(ctx, cm)
	case collalg.Bcast:
		return comm.Bcast(ctx, cm, f(k), root)
	case collalg.Reduce:
		return comm.Reduce(ctx, cm, f(k), rootOnly(k), comm.Sum, root)
	case collalg.Allreduce:
		return comm.Allreduce(ctx, cm, f(k), f(k), comm.Sum)
	case collalg.Gather:
		return comm.Gather(ctx, cm, f(k), rootOnly(n*k), root)
	case collalg.Scatter:
		return comm.Scatter(ctx, cm, rootOnly(n*k), f(k), root)
	case collalg.Allgather:
		return comm.Allgather(ctx, cm, f(k), f(n*k))
	case collalg.Alltoall:
		return comm.Alltoall(ctx, cm, f(n*k), f(n*k))
	case collalg.ReduceScatter:
		return comm.ReduceScatter(ctx, cm, f(n*k), f(k), comm.Sum)
	}
	return fmt.Errorf("conformance: no context case for %v", coll)
}

// ctxColl calls every collective on every rank with a context already
// done, then on every rank but the last with a context that ends while
// they wait for it: each call returns ctx.Err() within promptBound. (For
// Bcast and Scatter the last rank is the root; for Reduce and Gather the
// root is rank 0, and the other ranks may complete their part.) The ranks
// then still exchange messages with user tags. A collective canceled on
// some ranks leaves the group's collectives out of step (package comm
// says to close such a group), so each collective runs once, and the case
// needs the group in this process.
func ctxColl(c *tcase, ranks []comm.Comm) {
	n := len(ranks)
	late := n - 1
	for _, coll := range collalg.Colls {
		root := 0
		if coll == collalg.Bcast || coll == collalg.Scatter {
			root = late
		}
		for _, ends := range []bool{false, true} {
			v := ctxVariant{name: collName(coll), ends: ends}
			calls := make([]*prompt, n)
			ctxs := make([]context.Context, n)
			var cancels []context.CancelFunc
			for r, cm := range ranks {
				if ends && r == late {
					continue
				}
				cctx, cancel := v.ctxFor(c.ctx)
				cancels = append(cancels, cancel)
				ctxs[r] = cctx
				calls[r] = startPrompt(func() error { return ctxCollCall(cctx, coll, cm, root) })
			}
			hung := false
			outs := awaitAll(calls, ctxs)
			for r, p := range calls {
				if p == nil {
					continue
				}
				o := outs[r]
				// A rank whose part needs nothing from the late rank may
				// complete it: the non-roots of Reduce and Gather.
				mayComplete := ends && r != root && (coll == collalg.Reduce || coll == collalg.Gather)
				what := fmt.Sprintf("%v (on rank %d of %d)", v, r, n)
				if ends {
					what = fmt.Sprintf("%v (on rank %d of %d; rank %d never calls it)", v, r, n, late)
				}
				if verdict := ctxVerdict(what, o, mayComplete); verdict != "" {
					c.Error(verdict)
				}
				hung = hung || !o.returned
			}
			for _, cancel := range cancels {
				cancel()
			}
			if hung {
				// Release the calls that ignore their context: Close fails
				// them with ErrClosed.
				closeAll(c, ranks)
				for _, p := range calls {
					if p != nil {
						_ = p.join(c.ctx)
					}
				}
				return
			}
			if c.Failed() {
				return
			}
		}
	}
	// Still usable: a ring exchange with a user tag.
	runRanks(c, ranks, ruleContext, func(ctx context.Context, me int, cm comm.Comm) error {
		in := make([]byte, 16)
		next, prev := (me+1)%n, (me+n-1)%n
		if _, err := comm.Sendrecv(ctx, cm, blk(pattern(me, 16)), next, 9, blk(in), prev, 9); err != nil {
			return fmt.Errorf("a ring exchange after the canceled collectives: %w", err)
		}
		if d := diff(pattern(prev, 16), in); d != "" {
			return fmt.Errorf("a ring exchange after the canceled collectives: %s", d)
		}
		return nil
	})
}

// ctxCollNs are the group sizes of the collectives' context case.
func ctxCollNs(maxRanks int) []int {
	return []int{min(3, max(2, maxRanks))}
}

// collName returns the name of collective c's function in package comm.
func collName(c collalg.Coll) string {
	switch c {
	case collalg.Barrier:
		return "comm.Barrier"
	case collalg.Bcast:
		return "comm.Bcast"
	case collalg.Reduce:
		return "comm.Reduce"
	case collalg.Allreduce:
		return "comm.Allreduce"
	case collalg.Gather:
		return "comm.Gather"
	case collalg.Scatter:
		return "comm.Scatter"
	case collalg.Allgather:
		return "comm.Allgather"
	case collalg.Alltoall:
		return "comm.Alltoall"
	case collalg.ReduceScatter:
		return "comm.ReduceScatter"
	}
	return c.String()
}
