package procs

import "github.com/xpu-go/xpu/xerr"

// WriteFrames writes eager messages with tag to peer in one write of c's
// link — one record of the ring on a shared-memory link — as the writer
// goroutine writes the frames it has queued: the reader then reads all of
// them into its buffered reader at once. The link must be idle.
func WriteFrames(c *Comm, peer, tag int, msgs ...[]byte) error {
	l := c.links[peer]
	batch := make([]*outFrame, 0, len(msgs))
	l.w.mu.Lock()
	if !l.w.idleLocked() {
		l.w.mu.Unlock()
		return xerr.Detail(xerr.ErrInvalidArgument, "the link to rank %d is busy", peer)
	}
	for _, m := range msgs {
		if !l.credit.fits(len(m)) {
			l.w.mu.Unlock()
			return xerr.Detail(xerr.ErrInvalidArgument, "%d bytes do not go eagerly", len(m))
		}
		l.credit.out += len(m)
		f := &outFrame{payload: m}
		frame{typ: frameEager, tag: uint32(tag), a: uint64(len(m))}.encode(f.hdr[:])
		batch = append(batch, f)
	}
	l.w.writing = true
	l.w.mu.Unlock()
	err := l.w.write(batch, nil, 0, 0, false)
	l.w.mu.Lock()
	l.w.writing = false
	l.w.mu.Unlock()
	return err
}
