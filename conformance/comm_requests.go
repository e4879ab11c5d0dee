package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xpu-go/xpu/comm"
)

// The "requests" cases: how a request reports its completion — Test on
// requests that completed, failed or were canceled, and package comm's
// WaitAll and Await over mixes of them, as their documentation says.
// Rank 0 receives and rank 1 sends; each message is sent once rank 0 has
// posted what it is for.

// pollTest calls r.Test until it reports the request done, for at most
// lostBound, with short pauses between the calls.
func pollTest(ctx context.Context, r comm.Request) (st comm.Status, err error, done bool) {
	deadline := time.NewTimer(lostBound)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	for {
		if st, done, err := r.Test(); done {
			return st, err, true
		}
		select {
		case <-ctx.Done():
			return comm.Status{}, ctx.Err(), false
		case <-deadline.C:
			return comm.Status{}, nil, false
		case <-tick.C:
		}
	}
}

// settled checks that r reports the same outcome again, through Test and
// Wait, as a request that has settled must.
func settled(ctx context.Context, what string, r comm.Request, st comm.Status, want error) error {
	same := func(call string, gst comm.Status, gerr error) error {
		if want == nil && gerr == nil && gst == st {
			return nil
		}
		if want != nil && errors.Is(gerr, want) {
			return nil
		}
		if want == nil {
			return fmt.Errorf("%s: %s again gave %+v, %v; want %+v, nil: %v", what, call, gst, gerr, st, ruleSettled)
		}
		return fmt.Errorf("%s: %s again gave %+v, %v; want an error matching %v: %v", what, call, gst, gerr, want, ruleSettled)
	}
	gst, done, gerr := r.Test()
	if !done {
		return fmt.Errorf("%s: Test says it is not done, after it was: %v", what, ruleSettled)
	}
	if err := same("Test", gst, gerr); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, promptBound)
	defer cancel()
	gst, gerr = r.Wait(wctx)
	if wctx.Err() != nil && errors.Is(gerr, wctx.Err()) {
		return fmt.Errorf("%s: Wait did not return within %v: %v", what, promptBound, ruleSettled)
	}
	return same("Wait", gst, gerr)
}

// Tags of the request cases.
const (
	reqTag = 400 // + k for the k-th message
	reqSig = 430 // + k for the k-th go-ahead
)

// reqPeer is rank 1's part of the request cases: for each step, it waits
// for rank 0's go-ahead, then sends the messages of sizes (negative: it
// receives -size bytes instead) with tags reqTag+tags[i].
func reqPeer(ctx context.Context, cm comm.Comm, steps [][][2]int) error {
	for k, msgs := range steps {
		if err := await(ctx, cm, 0, reqSig+k); err != nil {
			return fmt.Errorf("waiting for rank 0's go-ahead #%d: %w", k, err)
		}
		for _, m := range msgs {
			size, tag := m[0], reqTag+m[1]
			if size < 0 {
				if _, err := comm.Recv(ctx, cm, blk(make([]byte, -size)), 0, tag); err != nil {
					return fmt.Errorf("receiving %d bytes with tag %d: %w", -size, tag, err)
				}
				continue
			}
			if err := comm.Send(ctx, cm, blk(pattern(tag, size)), 0, tag); err != nil {
				return fmt.Errorf("sending %d bytes with tag %d: %w", size, tag, err)
			}
		}
	}
	return nil
}

// reqRecv posts a receive of size bytes from rank 1 with tag reqTag+k.
func reqRecv(cm comm.Comm, size, k int) ([]byte, comm.Request, error) {
	buf := make([]byte, size)
	r, err := cm.Irecv(blk(buf), 1, reqTag+k)
	if err != nil {
		return nil, nil, fmt.Errorf("Irecv with tag %d: %w", reqTag+k, err)
	}
	return buf, r, nil
}

// reqCheck checks a receive of want bytes with tag reqTag+k that completed
// with st.
func reqCheck(what string, st comm.Status, buf []byte, k, want int) error {
	if err := checkStatus(what, st, 1, reqTag+k, want); err != nil {
		return err
	}
	if d := diff(pattern(reqTag+k, want), buf[:want]); d != "" {
		return fmt.Errorf("%s: %s", what, d)
	}
	return nil
}

// reqPost posts, in order, receives from rank 1 of the given sizes, the
// k-th with tag reqTag+k, then cancels the one at index canceled (rank 1
// sends nothing with its tag) and gives rank 1 its first go-ahead.
func reqPost(ctx context.Context, cm comm.Comm, canceled int, sizes ...int) ([][]byte, []comm.Request, error) {
	bufs := make([][]byte, len(sizes))
	rs := make([]comm.Request, len(sizes))
	for k, size := range sizes {
		var err error
		if bufs[k], rs[k], err = reqRecv(cm, size, k); err != nil {
			return nil, nil, err
		}
	}
	if err := rs[canceled].Cancel(); err != nil {
		return nil, nil, fmt.Errorf("Cancel: %w", err)
	}
	if err := signal(ctx, cm, 1, reqSig); err != nil {
		return nil, nil, err
	}
	return bufs, rs, nil
}

// reqCtxEnds checks a call that waits for a pending receive and whose
// context ends while it waits, as WaitAll and Await do: wait, run with such
// a context on a receive of 24 bytes with tag reqTag+k posted now, must
// return ctx.Err() promptly and leave the receive canceled, so that the
// message rank 1 sends after its second go-ahead goes to a Recv posted
// after. name is the call's name; what describes the call, recv its
// receive and cancels what it cancels, in its failures.
func reqCtxEnds(ctx context.Context, cm comm.Comm, k int, name, what, recv, cancels string,
	wait func(ctx context.Context, p comm.Request) error) error {
	buf, p, err := reqRecv(cm, 24, k)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, ctxEnds)
	call := startPrompt(func() error { return wait(cctx, p) })
	o := call.await(cctx)
	cancel()
	if verdict := ctxVerdict(what, o, false); verdict != "" {
		if !o.returned {
			_ = signal(ctx, cm, 1, reqSig+1) // the message releases it
			_ = call.join(ctx)
		}
		return errors.New(verdict)
	}
	if _, done, err := p.Test(); !done || !errors.Is(err, comm.ErrCanceled) {
		return fmt.Errorf("after %s returned ctx.Err(), Test of %s: done %v, error %v; "+
			"want done, ErrCanceled (%s cancels %s when its context ends)", name, recv, done, err, name, cancels)
	}
	if err := signal(ctx, cm, 1, reqSig+1); err != nil {
		return err
	}
	st, err := comm.Recv(ctx, cm, blk(buf), 1, reqTag+k)
	if err != nil {
		return fmt.Errorf("a Recv after %s's context ended: %w", name, err)
	}
	return reqCheck("a Recv after "+name+"'s context ended", st, buf, k, 24)
}

// reqTest: Test reports a receive and a send that complete while nobody
// waits for them as done, with their status, and a truncated receive as
// done with ErrTruncated; each reports the same again, through Test and
// Wait.
func reqTest(ctx context.Context, me, n int, cm comm.Comm) error {
	steps := [][][2]int{{{40, 0}, {-30, 1}, {20, 2}}}
	if me == 1 {
		return reqPeer(ctx, cm, steps)
	}
	buf, r, err := reqRecv(cm, 64, 0)
	if err != nil {
		return err
	}
	sr, err := cm.Isend(blk(pattern(reqTag+1, 30)), 1, reqTag+1)
	if err != nil {
		return fmt.Errorf("Isend: %w", err)
	}
	_, tr, err := reqRecv(cm, 8, 2)
	if err != nil {
		return err
	}
	if err := signal(ctx, cm, 1, reqSig); err != nil {
		return err
	}
	for _, q := range []struct {
		what string
		r    comm.Request
		st   comm.Status
		err  error
	}{
		{"a receive of 40 bytes", r, comm.Status{Source: 1, Tag: reqTag, Count: 40}, nil},
		{"a send of 30 bytes", sr, comm.Status{Source: 1, Tag: reqTag + 1, Count: 30}, nil},
		{"a receive of 20 bytes into 8 (truncated)", tr, comm.Status{}, comm.ErrTruncated},
	} {
		st, err, done := pollTest(ctx, q.r)
		switch {
		case !done && ctx.Err() == nil:
			return fmt.Errorf("Test of %s never reported it done within %v, though rank 1 took part: %v", q.what, lostBound, ruleTest)
		case !done:
			return fmt.Errorf("Test of %s: %w", q.what, err)
		case q.err == nil && err != nil:
			return fmt.Errorf("Test of %s: done with error %v", q.what, err)
		case q.err == nil && st != q.st:
			return fmt.Errorf("Test of %s: done with status %+v, want %+v: %v", q.what, st, q.st, ruleTest)
		case q.err != nil && !errors.Is(err, q.err):
			return fmt.Errorf("Test of %s: done with error %v, want one matching %v", q.what, err, q.err)
		}
		if err := settled(ctx, "Test of "+q.what, q.r, st, q.err); err != nil {
			return err
		}
	}
	if d := diff(pattern(reqTag, 40), buf[:40]); d != "" {
		return fmt.Errorf("the receive Test reported done: %s", d)
	}
	return nil
}

// reqWaitAll: WaitAll over requests that completed (waited for already or
// not), failed (truncated) and were canceled returns the error of the
// first that failed, in argument order, once every request has settled;
// nil entries are skipped. WaitAll whose context ends while a request is
// pending returns ctx.Err() and leaves that request canceled: a message
// sent later goes to a new receive.
func reqWaitAll(ctx context.Context, me, n int, cm comm.Comm) error {
	steps := [][][2]int{{{16, 0}, {32, 1}, {16, 3}}, {{24, 4}}}
	if me == 1 {
		return reqPeer(ctx, cm, steps)
	}
	// a completes, and is waited for before WaitAll; b is truncated; c is
	// canceled; d completes, and is first waited for by WaitAll.
	bufs, rs, err := reqPost(ctx, cm, 2, 16, 4, 8, 16)
	if err != nil {
		return err
	}
	a, b, c, d := rs[0], rs[1], rs[2], rs[3]
	st, err := a.Wait(ctx)
	if err != nil {
		return fmt.Errorf("Wait of a receive: %w", err)
	}
	if err := reqCheck("a receive", st, bufs[0], 0, 16); err != nil {
		return err
	}
	for _, tc := range []struct {
		what string
		reqs []comm.Request
		want error
	}{
		{"WaitAll(completed, nil, canceled, truncated, completed)", []comm.Request{a, nil, c, b, d}, comm.ErrCanceled},
		{"WaitAll(completed, truncated, canceled)", []comm.Request{a, b, c}, comm.ErrTruncated},
		{"WaitAll(completed, completed)", []comm.Request{d, a}, nil},
		{"WaitAll()", nil, nil},
	} {
		wctx, cancel := context.WithTimeout(ctx, lostBound)
		err := comm.WaitAll(wctx, tc.reqs...)
		expired := wctx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case expired:
			return fmt.Errorf("%s did not return within %v: %v", tc.what, lostBound, ruleSettled)
		case tc.want == nil && err != nil:
			return fmt.Errorf("%s: %v, want nil", tc.what, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			return fmt.Errorf("%s: %v, want the error of the first request that failed, matching %v: %v", tc.what, err, tc.want, ruleSettled)
		}
	}
	// Every request settled, with its own outcome.
	if st, done, err := d.Test(); !done || err != nil {
		return fmt.Errorf("after WaitAll, Test of a receive it waited for: done %v, error %v: %v", done, err, ruleSettled)
	} else if err := reqCheck("a receive WaitAll waited for", st, bufs[3], 3, 16); err != nil {
		return err
	}
	if err := settled(ctx, "a truncated receive, after WaitAll", b, comm.Status{}, comm.ErrTruncated); err != nil {
		return err
	}
	if err := settled(ctx, "a canceled receive, after WaitAll", c, comm.Status{}, comm.ErrCanceled); err != nil {
		return err
	}

	// A context that ends while a request is pending.
	return reqCtxEnds(ctx, cm, 4, "WaitAll", "WaitAll(completed, pending) whose context ends while it waits",
		"the receive it waited for", "what is pending",
		func(ctx context.Context, p comm.Request) error { return comm.WaitAll(ctx, a, p) })
}

// reqAwait: Await of a request that completed returns its status again,
// even with a context already done; of a failed request, its error; of a
// canceled one, ErrCanceled; and of a pending one whose context ends,
// ctx.Err(), the request canceled so that a message sent later goes to a
// new receive.
func reqAwait(ctx context.Context, me, n int, cm comm.Comm) error {
	steps := [][][2]int{{{16, 0}, {32, 1}}, {{24, 3}}}
	if me == 1 {
		return reqPeer(ctx, cm, steps)
	}
	// a completes, b is truncated, c is canceled.
	bufs, rs, err := reqPost(ctx, cm, 2, 16, 4, 8)
	if err != nil {
		return err
	}
	a, b, c := rs[0], rs[1], rs[2]
	st, err := comm.Await(ctx, a)
	if err != nil {
		return fmt.Errorf("Await of a receive: %w", err)
	}
	if err := reqCheck("Await of a receive", st, bufs[0], 0, 16); err != nil {
		return err
	}
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	st2, err := comm.Await(done, a)
	if err != nil || st2 != st {
		return fmt.Errorf("Await, with a context already done, of a receive that completed: %+v, %v; want %+v, nil "+
			"(a completion is reported as such): %v", st2, err, st, ruleSettled)
	}
	if _, err := comm.Await(ctx, b); !errors.Is(err, comm.ErrTruncated) {
		return fmt.Errorf("Await of a truncated receive: %v, want ErrTruncated", err)
	}
	if _, err := comm.Await(ctx, c); !errors.Is(err, comm.ErrCanceled) {
		return fmt.Errorf("Await of a canceled receive: %v, want ErrCanceled: %v", err, ruleCancel)
	}
	if err := settled(ctx, "a truncated receive, after Await", b, comm.Status{}, comm.ErrTruncated); err != nil {
		return err
	}

	return reqCtxEnds(ctx, cm, 3, "Await", "Await of a pending receive whose context ends while it waits",
		"its receive", "the request",
		func(ctx context.Context, p comm.Request) error { _, err := comm.Await(ctx, p); return err })
}
