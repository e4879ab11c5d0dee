package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/xpu-go/xpu/comm"
)

// Notifications (comm.Notifier): the cases of the section "onesided"
// that need them, run on communicators that implement comm.Notifier and
// skipped, saying so, on the others.

// needsNotifier says why a case of notifications cannot run on cm, ""
// when it can.
func needsNotifier(cm comm.Comm) string {
	if _, ok := cm.(comm.Notifier); ok {
		return ""
	}
	return fmt.Sprintf("%s does not implement comm.Notifier", goTypeName(cm))
}

// notifySize is the size of the region osNotify writes: large enough
// that a transport moves it in several pieces.
const notifySize = 1 << 20

// osNotify: rank 0 Puts four parts into rank 1's region without waiting
// for them and notifies rank 1, which finds the bytes in place when the
// notification arrives — having posted no receive for it, and with a
// wildcard receive pending that the notifications must not match. Rank 1
// then reads rank 0's region with a Get and notifies rank 0, which may
// then change it. Notifications from one rank arrive in order; an empty
// one and one of MaxNotification bytes are carried; one longer is refused
// and not sent; a rank notifies itself; an ended context polls.
func osNotify(ctx context.Context, me, n int, cm comm.Comm) error {
	one, g, keys, err := exposeAll(ctx, cm, n, notifySize)
	if err != nil {
		return err
	}
	defer g.region.Close()
	nt := cm.(comm.Notifier)
	if me == 0 {
		return notifyOrigin(ctx, nt, g, keys)
	}
	// A wildcard receive, pending across the notifications.
	wild := make([]byte, 8)
	rw, err := cm.Irecv(blk(wild), comm.AnySource, comm.AnyTag)
	if err != nil {
		return fmt.Errorf("Irecv(AnySource, AnyTag): %w", err)
	}
	if err := notifyTarget(ctx, nt, one, g, keys, rw); err != nil {
		_ = rw.Cancel()
		_, _ = rw.Wait(ctx)
		return err
	}
	// Rank 0's last message, which the wildcard receive is for.
	if st, err := rw.Wait(ctx); err != nil || st.Source != 0 || st.Tag != tagGo {
		return fmt.Errorf("the wildcard receive of rank 0's message: status %+v, error %v; want rank 0's tag %d", st, err, tagGo)
	}
	return nil
}

// notifyMsgs are the notifications rank 0 sends, in order, after the
// first: empty, and the longest allowed.
var notifyMsgs = [][]byte{{}, pattern(77, comm.MaxNotification)}

// notifyOrigin is rank 0's part of osNotify.
func notifyOrigin(ctx context.Context, nt comm.Notifier, g *guarded, keys []comm.RemoteKey) error {
	var reqs []comm.Request
	for part := range 4 {
		r, err := nt.Put(blk(pattern(600+part, notifySize/4)), keys[1], part*notifySize/4)
		if err != nil {
			return fmt.Errorf("Put of part %d: %w", part, err)
		}
		reqs = append(reqs, r)
	}
	if err := nt.Notify(ctx, 1, []byte("parts")); err != nil {
		return fmt.Errorf("Notify(1) after four Puts: %w", err)
	}
	if err := nt.Notify(ctx, 1, pattern(78, comm.MaxNotification+1)); !errors.Is(err, comm.ErrInvalidArgument) {
		return fmt.Errorf("Notify of %d bytes, one more than MaxNotification: error %v, want ErrInvalidArgument: %v", comm.MaxNotification+1, err, ruleNotify)
	}
	if err := nt.Notify(ctx, nt.Size(), nil); !errors.Is(err, comm.ErrInvalidArgument) {
		return fmt.Errorf("Notify of rank %d, outside the group: error %v, want ErrInvalidArgument: %v", nt.Size(), err, ruleNotify)
	}
	for i, m := range notifyMsgs {
		if err := nt.Notify(ctx, 1, m); err != nil {
			return fmt.Errorf("Notify(1) of %d bytes (notification %d): %w", len(m), i+2, err)
		}
	}
	// Rank 1 checks the Puts, reads this rank's region, then notifies:
	// only then may this rank change it. The Puts are waited for only
	// afterwards: the notification alone must have brought them.
	got, err := nt.WaitNotification(ctx)
	if err != nil {
		return fmt.Errorf("WaitNotification for rank 1's Get: %w", err)
	}
	if got.Source != 1 || string(got.Msg) != "read" {
		return fmt.Errorf("notification from rank %d %q, want rank 1's %q: %v", got.Source, got.Msg, "read", ruleNotify)
	}
	if err := comm.WaitAll(ctx, reqs...); err != nil {
		return fmt.Errorf("the four Puts: %w", err)
	}
	copy(g.bytes(), pattern(999, notifySize))
	if err := notifySelf(ctx, nt, g, keys[0]); err != nil {
		return err
	}
	return signal(ctx, nt, 1, tagGo)
}

// notifyTarget is rank 1's part of osNotify.
func notifyTarget(ctx context.Context, nt comm.Notifier, one comm.OneSided, g *guarded, keys []comm.RemoteKey, wild comm.Request) error {
	got, err := nt.WaitNotification(ctx)
	if err != nil {
		return fmt.Errorf("WaitNotification for rank 0's Puts: %w", err)
	}
	if got.Source != 0 || string(got.Msg) != "parts" {
		return fmt.Errorf("first notification from rank %d %q, want rank 0's %q: %v", got.Source, got.Msg, "parts", ruleNotify)
	}
	for part := range 4 {
		if d := diff(pattern(600+part, notifySize/4), g.bytes()[part*notifySize/4:(part+1)*notifySize/4]); d != "" {
			return fmt.Errorf("part %d of rank 0's Puts, read on receipt of the notification rank 0 sent after them: %s: %v", part, d, ruleNotify)
		}
	}
	if d := g.guardsIntact(1); d != "" {
		return fmt.Errorf("rank 0's Puts wrote outside the region: %s: %v", d, rulePutGet)
	}
	for i, m := range notifyMsgs {
		got, err := nt.WaitNotification(ctx)
		if err != nil {
			return fmt.Errorf("WaitNotification for rank 0's notification %d (%d bytes): %w", i+2, len(m), err)
		}
		if d := diff(m, got.Msg); got.Source != 0 || d != "" {
			return fmt.Errorf("notification %d from rank %d, want rank 0's of %d bytes (%s): %v", i+2, got.Source, len(m), d, ruleNotify)
		}
	}
	if err := pollNone(nt, "after every notification rank 0 sent was taken"); err != nil {
		return err
	}
	if _, done, _ := wild.Test(); done {
		return fmt.Errorf("a receive of AnySource and AnyTag completed while rank 0 sent only notifications: %v", ruleNotify)
	}
	// Read rank 0's region, then say so.
	back := make([]byte, notifySize)
	if err := oneTransfer(ctx, one, false, blk(back), keys[0], 0); err != nil {
		return err
	}
	if err := nt.Notify(ctx, 0, []byte("read")); err != nil {
		return fmt.Errorf("Notify(0) after a Get: %w", err)
	}
	if d := diff(pattern(0, notifySize), back); d != "" {
		return fmt.Errorf("a Get of rank 0's region, which rank 0 changes only when notified afterwards: %s: %v", d, rulePutGet)
	}
	return nil
}

// notifySelf: a rank Puts into its own region and notifies itself.
func notifySelf(ctx context.Context, nt comm.Notifier, g *guarded, mine comm.RemoteKey) error {
	r, err := comm.PutNotify(ctx, nt, blk(pattern(31, 100)), mine, 10, []byte("self"))
	if err != nil {
		return fmt.Errorf("PutNotify to this rank's own region: %w", err)
	}
	got, err := nt.WaitNotification(ctx)
	if err != nil {
		return fmt.Errorf("WaitNotification for this rank's own notification: %w", err)
	}
	if got.Source != nt.Rank() || string(got.Msg) != "self" {
		return fmt.Errorf("notification from rank %d %q, want this rank's (%d) %q: %v", got.Source, got.Msg, nt.Rank(), "self", ruleNotify)
	}
	if d := diff(pattern(31, 100), g.bytes()[10:110]); d != "" {
		return fmt.Errorf("this rank's own Put, on its notification: %s: %v", d, ruleNotify)
	}
	if _, err := r.Wait(ctx); err != nil {
		return fmt.Errorf("Wait of the Put to this rank: %w", err)
	}
	return pollNone(nt, "after this rank's own notification was taken")
}

// pollNone polls for a notification with an ended context and wants
// none.
func pollNone(nt comm.Notifier, when string) error {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := nt.WaitNotification(done)
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("WaitNotification with an ended context %s: notification %+v, error %v; want context.Canceled: %v", when, got, err, ruleNotify)
	}
	return nil
}

// osNotifyBatch: rank 1 pulls pages of rank 0 with a batch of Gets and
// writes them back with a batch of Puts posted with a notification, on
// which rank 0 finds them in place.
func osNotifyBatch(ctx context.Context, me, n int, cm comm.Comm) error {
	const page, pages = 4096, 40
	_, g, keys, err := exposeAll(ctx, cm, n, page*pages)
	if err != nil {
		return err
	}
	defer g.region.Close()
	nt := cm.(comm.Notifier)
	if me == 0 {
		got, err := nt.WaitNotification(ctx)
		if err != nil {
			return fmt.Errorf("WaitNotification for rank 1's batch: %w", err)
		}
		if got.Source != 1 || string(got.Msg) != "pages" {
			return fmt.Errorf("notification from rank %d %q, want rank 1's %q: %v", got.Source, got.Msg, "pages", ruleNotify)
		}
		// Pages 0..19 were copied, in reverse, onto pages 20..39.
		for i := range pages / 2 {
			want := pattern(0, page*pages)[(pages/2-1-i)*page : (pages/2-i)*page]
			if d := diff(want, g.bytes()[(pages/2+i)*page:(pages/2+i+1)*page]); d != "" {
				return fmt.Errorf("page %d of rank 0, written by rank 1's batch of Puts posted with a notification, read on it: %s: %v", pages/2+i, d, ruleNotify)
			}
		}
		return signal(ctx, cm, 1, tagDone)
	}
	buf := make([]byte, page*pages/2)
	var gets, puts []comm.Xfer
	for i := range pages / 2 {
		local, _ := blk(buf).Slice(i*page, page)
		gets = append(gets, comm.Xfer{Local: local, Remote: keys[0], RemoteOff: (pages/2 - 1 - i) * page})
		puts = append(puts, comm.Xfer{Local: local, Remote: keys[0], RemoteOff: (pages/2 + i) * page})
	}
	gb, err := comm.PrepareBatch(nt, false, gets)
	if err != nil {
		return fmt.Errorf("PrepareBatch of %d Gets: %w", len(gets), err)
	}
	if err := gb.Run(ctx); err != nil {
		return fmt.Errorf("a batch of %d Gets: %w", len(gets), err)
	}
	pb, err := comm.PrepareBatch(nt, true, puts)
	if err != nil {
		return fmt.Errorf("PrepareBatch of %d Puts: %w", len(puts), err)
	}
	if _, err := pb.PostNotify(ctx, pattern(5, comm.MaxNotification+1)); !errors.Is(err, comm.ErrInvalidArgument) {
		return fmt.Errorf("PostNotify with a notification of %d bytes: error %v, want ErrInvalidArgument: %v", comm.MaxNotification+1, err, ruleNotify)
	}
	r, err := pb.PostNotify(ctx, []byte("pages"))
	if err != nil {
		return fmt.Errorf("PostNotify of a batch of %d Puts: %w", len(puts), err)
	}
	if _, err := r.Wait(ctx); err != nil {
		return fmt.Errorf("a batch of %d Puts posted with a notification: %w", len(puts), err)
	}
	return await(ctx, cm, 0, tagDone)
}
