package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// guide is the guide to writing a backend; each rule links to its section.
const guide = "docs/backend-guide.md"

// A rule is a requirement of comm.Comm as a failure states it: what the
// backend must do, so that a backend author who sees a case time out reads
// why the case waited, not only what it waited for, and the section of the
// guide (anchor) that explains it.
type rule struct{ text, anchor string }

// String returns the rule with where the guide explains it.
func (r rule) String() string { return r.text + " (see " + guide + "#" + r.anchor + ")" }

// Anchors of the sections of the guide the rules point to.
const (
	guideCommAnchor   = "3-communication-commcomm"
	guideMatching     = "comm-matching"
	guideTruncation   = "comm-truncation"
	guideRequests     = "comm-requests"
	guideCancel       = "comm-cancel"
	guideClose        = "comm-close"
	guidePeerLost     = "comm-peer-lost"
	guideRevocation   = "comm-revocation"
	guideCommContexts = "comm-contexts"
	guideOneSided     = "comm-one-sided"
	guideFlight       = "comm-flight"
)

// The rules the communicator cases check, as their failures quote them.
var (
	ruleDeliver = rule{"a message sent to a rank must reach the matching receive posted there, " +
		"whatever its size: a message too large to go eagerly must still make progress once the receive is posted", guideMatching}
	ruleNonOvertaking = rule{"messages from one source with one tag must match receives in the order they were sent", guideMatching}
	ruleAnySource     = rule{"a receive from AnySource must match a message from any rank", guideMatching}
	ruleAnyTag        = rule{"a receive with AnyTag must match a message with any user tag, and never one with a reserved tag", guideMatching}
	rulePostedOrder   = rule{"a message goes to the receive posted first among those it matches, " +
		"whether that receive names its source and tag or uses AnySource or AnyTag (MPI's matching order)", guideMatching}
	ruleTruncated = rule{"a message longer than the receive buffer must fail that receive with ErrTruncated, " +
		"and be consumed, rather than wait for a larger receive", guideTruncation}
	ruleCancel = rule{"after Cancel, Wait must return promptly: the request completed, " +
		"or it failed with ErrCanceled and its buffer is no longer used", guideCancel}
	ruleContext = rule{"a blocking call must return an error matching ctx.Err() promptly once its context is done, " +
		"and leave the communicator usable: Send and Recv withdraw what they started, Wait leaves its request pending", guideCommContexts}
	ruleCtxWithdraw = rule{"a Recv that returns ctx.Err() must withdraw its receive, " +
		"so that the next message goes to the next receive", guideCommContexts}
	ruleTest = rule{"Test must report a request that has completed as done, with its Status, " +
		"without Wait being called (Test makes the progress it needs)", guideRequests}
	ruleSettled = rule{"Wait and Test of a request that has completed, failed or been canceled " +
		"must report the same outcome every time, at once", guideRequests}
	ruleClosed = rule{"Close must fail this rank's pending requests with ErrClosed, " +
		"and every later call on it must fail with ErrClosed", guideClose}
	rulePeerLost = rule{"an operation that needs a rank that closed or died must fail with ErrPeerLost " +
		"within a bound, never wait for its context", guidePeerLost}
	ruleRevoke = rule{"once a collective meets a lost peer on any rank, every rank's pending and later " +
		"collective operations must fail with ErrPeerLost (revocation, as ULFM's MPI_Comm_revoke): " +
		"a survivor may never exchange messages with the lost rank itself, and only revocation tells it", guideRevocation}
	ruleCollective = rule{"every rank calls the same collectives in the same order with matching arguments, " +
		"so each must complete on every rank; the shared algorithms need only point-to-point messages " +
		"with reserved tags, carried like any other", guideCommAnchor}
	ruleInvalid = rule{"a call with a bad rank, tag, root, size or reduction must fail at once with " +
		"ErrInvalidArgument on the rank that made it, naming the backend (impl's checks wrapped with xerr.Op), " +
		"sending nothing, and leave the communicator usable", guideCommAnchor}
	ruleBarrier = rule{"Barrier must return on every rank once, and only once, every rank has entered it", guideCommAnchor}
	ruleRanks   = rule{"the factory's ranks must be numbered 0 to n-1, each once, agree on the size, " +
		"and deliver a message to the rank it names", guideCommAnchor}
	rulePutGet = rule{"Put must write its bytes, and only them, at the offset it names in the target's region, " +
		"and Get read them from there; a transfer completes once its bytes are in place", guideOneSided}
	ruleFlush = rule{"after Flush(ctx, rank) returns, every Put this rank started to rank is in place at the target, " +
		"so a message sent after it is received after the bytes are there", guideOneSided}
	ruleOneSidedInvalid = rule{"a transfer outside its region, to no rank, or with a key that no open region of the " +
		"communicator has must fail with ErrInvalidArgument, writing no byte anywhere", guideOneSided}
	ruleNotify = rule{"a notification is received after every Put and Get its sender started to the receiver " +
		"before Notify is complete there, in the order sent, matching no receive; one longer than " +
		"MaxNotification fails with ErrInvalidArgument and is not sent", guideOneSided}
	ruleOneSidedLost = rule{"a transfer to, or Flush of, a rank that closed or died must fail with ErrPeerLost " +
		"within the failure bound, never hang", guidePeerLost}
)

// commRules lists the rules, for the test that their anchors are in the
// guide.
var commRules = []rule{ruleDeliver, ruleNonOvertaking, ruleAnySource, ruleAnyTag, rulePostedOrder, ruleTruncated,
	ruleCancel, ruleContext, ruleCtxWithdraw, ruleTest, ruleSettled, ruleClosed, rulePeerLost, ruleRevoke,
	ruleCollective, ruleInvalid, ruleBarrier, ruleRanks, ruleDevice}

// promptBound is how long after its context ends a blocking call may take
// to return: the grace package comm gives a canceled request to settle,
// with room for a loaded machine.
const promptBound = 2 * time.Second

// prompt is a call running on a goroutine of its own, so that a call that
// ignores its context is seen, and reported, within promptBound of the
// context's end rather than at the case's timeout.
type prompt struct {
	done chan struct{}
	err  error
}

// startPrompt runs call on its own goroutine.
func startPrompt(call func() error) *prompt {
	p := &prompt{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = call()
	}()
	return p
}

// outcome is what a call run by a prompt did: its error, whether it
// returned within promptBound of its context's end, and the context's
// error when it returned (or when it was given up on).
type outcome struct {
	err      error
	ctxErr   error
	returned bool
}

// await waits for the call until promptBound after ctx ends.
func (p *prompt) await(ctx context.Context) outcome {
	select {
	case <-p.done:
		return p.outcome(ctx)
	case <-ctx.Done():
	}
	t := time.NewTimer(promptBound)
	defer t.Stop()
	select {
	case <-p.done:
		return p.outcome(ctx)
	case <-t.C:
		return outcome{ctxErr: ctx.Err()} // given up on, even if it returns now
	}
}

// outcome is what the call has done by now, with ctx's error as it is now.
func (p *prompt) outcome(ctx context.Context) outcome {
	select {
	case <-p.done:
		return outcome{err: p.err, ctxErr: ctx.Err(), returned: true}
	default:
		return outcome{ctxErr: ctx.Err()}
	}
}

// awaitAll waits for the calls ps (nil entries are skipped), each until
// promptBound after the last of their contexts ctxs ended: one bound for
// all, as they wait side by side.
func awaitAll(ps []*prompt, ctxs []context.Context) []outcome {
	for _, ctx := range ctxs {
		if ctx != nil {
			<-ctx.Done()
		}
	}
	t := time.NewTimer(promptBound)
	defer t.Stop()
	out := make([]outcome, len(ps))
	expired := false
	for i, p := range ps {
		if p == nil {
			continue
		}
		if !expired {
			select {
			case <-p.done:
			case <-t.C:
				expired = true
			}
		}
		out[i] = p.outcome(ctxs[i])
	}
	return out
}

// join waits for a call that did not return in time, once it has been
// released, until the case's context ends.
func (p *prompt) join(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("it still had not returned when the case's context ended")
	}
}

// ctxVerdict checks what a blocking call did once its context ended: it
// returned, with an error matching ctx.Err(). okNil says whether nil is
// allowed too (the call may have completed before the context ended). It
// returns "" when the outcome keeps the rules.
func ctxVerdict(what string, o outcome, okNil bool) string {
	switch {
	case !o.returned:
		return fmt.Sprintf("%s had not returned %v after its context ended: %v", what, promptBound, ruleContext)
	case o.err == nil && okNil:
		return ""
	case o.err == nil:
		return fmt.Sprintf("%s returned nil after its context ended, though it could not complete: %v", what, ruleContext)
	case o.ctxErr == nil:
		return fmt.Sprintf("%s: %v (its context had not ended)", what, o.err)
	case !errors.Is(o.err, o.ctxErr):
		return fmt.Sprintf("%s returned %q after its context ended, which does not match ctx.Err() (%v): %v", what, o.err, o.ctxErr, ruleContext)
	}
	return ""
}
