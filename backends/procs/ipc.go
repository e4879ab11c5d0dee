package procs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
	"github.com/xpu-go/xpu/xerr"
)

// Device blocks through the peer's mapping (CUDA IPC) over shared-memory
// links. The sender of a block whose space shares it announces the
// block's description (frameIPC) where a large message announces its
// bytes (frameRTS); the receive it matches — at once, or once posted —
// finds an importer (memspace.ImporterFor), maps the block, and copies
// from it into its own block, device or host, with transfer.CopyBlock,
// in a goroutine of its own (a device copy may be long, and the link's
// reader must go on); then it answers (frameIPCDone), upon which the send
// completes: the sender's block is in use until then, as the buffer of a
// single copy is (cma.go). A receiver that cannot map the block — no
// importer, or one that says memspace.ErrNotShareable — answers with a
// clear-to-send as for any large message, and the sender, which then
// copies its block into a host stand-in, streams it in data frames: the
// message arrives all the same, in its place among the others.
//
// A receiver keeps each allocation it mapped until the sender says it
// was freed (frameForget, sent when the space that shared it tells of
// the free, memspace.FreeNotifier) or the link ends; a space that does
// not tell gives every allocation a handle of its own, so a stale
// mapping is never taken for a new one, and goes with the link.

// Answers of frameIPCDone (its tag).
const (
	ipcCopied uint32 = 0 // the receiver copied the bytes
	ipcFailed uint32 = 1 // the receiver's copy failed: the message is lost
)

// Lengths of a description (frameIPC's payload): Size and Offset, the
// lengths of Kind and Handle, then Kind and Handle; a one-sided
// transfer's adds the region's key, the offset and the operation
// (oneIPCTrailer, onesided_ipc.go).
const (
	ipcFixed   = 8 + 8 + 1 + 1
	ipcMaxKind = 64
	ipcDescMax = ipcFixed + ipcMaxKind + memspace.MaxHandle + oneIPCTrailer
)

// ipcLink is a link's state of mapped messages: the copies running, and
// the allocations of the peer this rank mapped.
type ipcLink struct {
	mu       sync.Mutex
	idle     sync.Cond // on mu: running dropped to zero
	running  int       // goroutines of ipcGo running
	closed   bool      // the link failed: no goroutine starts, nothing is mapped
	imported map[string]memspace.Importer
	// answered counts the mapped messages this rank copied and answered.
	answered atomic.Uint64
}

// ipcGo runs f in a goroutine that the link's release waits for; false
// (and f not run) once the link has failed.
func (l *link) ipcGo(f func()) bool {
	l.ipc.mu.Lock()
	if l.ipc.closed {
		l.ipc.mu.Unlock()
		return false
	}
	l.ipc.running++
	l.ipc.mu.Unlock()
	go func() {
		defer func() {
			l.ipc.mu.Lock()
			l.ipc.running--
			if l.ipc.running == 0 {
				l.ipc.idle.Broadcast()
			}
			l.ipc.mu.Unlock()
		}()
		f()
	}()
	return true
}

// ipcDown stops mapping on a link that failed and forgets every
// allocation of the peer this rank mapped: the peer is gone, or will
// not say when it frees them.
func (l *link) ipcDown() {
	l.ipc.mu.Lock()
	l.ipc.closed = true
	imported := l.ipc.imported
	l.ipc.imported = nil
	l.ipc.mu.Unlock()
	for h, imp := range imported {
		imp.Forget([]byte(h))
	}
}

// awaitIPC waits for the goroutines of ipcGo: once the link has failed,
// none starts.
func (l *link) awaitIPC() {
	l.ipc.mu.Lock()
	for l.ipc.running > 0 {
		l.ipc.idle.Wait()
	}
	l.ipc.mu.Unlock()
}

// encodeShared writes the description s for frameIPC.
func encodeShared(s memspace.Shared) []byte {
	p := make([]byte, ipcFixed, ipcFixed+len(s.Kind)+len(s.Handle))
	binary.LittleEndian.PutUint64(p[0:], uint64(s.Size))
	binary.LittleEndian.PutUint64(p[8:], uint64(s.Offset))
	p[16], p[17] = byte(len(s.Kind)), byte(len(s.Handle))
	return append(append(p, s.Kind...), s.Handle...)
}

// decodeShared reads a description of a block of n bytes; the error
// matches ErrProtocol.
func decodeShared(p []byte, n int) (memspace.Shared, error) {
	if len(p) < ipcFixed {
		return memspace.Shared{}, xerr.Detail(ErrProtocol, "a block's description of %d bytes", len(p))
	}
	kl, hl := int(p[16]), int(p[17])
	if kl > ipcMaxKind || ipcFixed+kl+hl != len(p) {
		return memspace.Shared{}, xerr.Detail(ErrProtocol, "a block's description of %d bytes with a kind of %d and a handle of %d", len(p), kl, hl)
	}
	s := memspace.Shared{
		Size:   int64(binary.LittleEndian.Uint64(p[0:])),
		Offset: int64(binary.LittleEndian.Uint64(p[8:])),
		Len:    int64(n),
		Kind:   string(p[ipcFixed : ipcFixed+kl]),
		Handle: bytes.Clone(p[ipcFixed+kl:]),
	}
	if err := s.Check(); err != nil {
		return memspace.Shared{}, xerr.Detail(ErrProtocol, "a block's description: %w", err)
	}
	return s, nil
}

// share describes buf for the peer dest when buf's space shares it; false
// when it does not, and the message is staged.
func (c *Comm) share(buf memspace.Block, dest int) (memspace.Shared, bool) {
	sh, ok := memspace.As[memspace.Sharer](buf.Space())
	if !ok {
		return memspace.Shared{}, false
	}
	s, err := sh.Share(buf)
	if err == nil {
		err = s.Check()
		if err == nil && (len(s.Kind) > ipcMaxKind || s.Len != int64(buf.Len())) {
			err = xerr.Detail(memspace.ErrInvalidArgument, "description %v of %v", s, buf)
		}
	}
	if err != nil {
		c.logger().Debug("procs: device block staged: its space does not share it", "rank", c.rank, "peer", dest, "block", buf.String(), "err", err)
		return memspace.Shared{}, false
	}
	c.shares.remember(c, buf, s, dest)
	return s, true
}

// announceIPC queues the announcement of the send r by the description s.
func (l *link) announceIPC(r *request, s memspace.Shared) error {
	f := &outFrame{payload: encodeShared(s)}
	l.w.mu.Lock()
	if err := l.w.writable(); err != nil {
		l.w.mu.Unlock()
		return err
	}
	l.w.nextID++
	r.id = l.w.nextID
	r.via = l
	r.dev.ipc = true
	l.w.announced[r.id] = r
	frame{typ: frameIPC, tag: uint32(r.tag), a: uint64(s.Len), b: r.id, c: uint64(len(f.payload))}.encode(f.hdr[:])
	l.w.queue = append(l.w.queue, f)
	l.w.mu.Unlock()
	l.w.kick()
	// Its answer must be read while the sender waits elsewhere (sendMsg).
	l.role.wakeReader()
	return nil
}

// onIPC takes an announcement by description (size bytes with tag, the
// description's desc bytes follow): matched to a posted receive, it is
// mapped and copied (acceptIPC); else it waits on the unexpected queue
// as an announcement of bytes does.
func (l *link) onIPC(tag, size int, id uint64, desc int) error {
	var p [ipcDescMax]byte
	if _, err := io.ReadFull(l.rd.br, p[:desc]); err != nil {
		return err
	}
	if l.shm == nil {
		return xerr.Detail(ErrProtocol, "a device block announced by its description on a TCP link")
	}
	s, err := decodeShared(p[:desc], size)
	if err != nil {
		return err
	}
	c := l.c
	r, err := l.matchAnnounced(tag, func() {
		c.enqueue(&request{c: c, kind: kindRTSMsg, peer: l.peer, tag: tag, id: id, size: size, via: l, dev: &devState{shared: s}})
	})
	if r == nil || err != nil {
		return err
	}
	return l.acceptIPC(r, tag, id, s, false)
}

// acceptIPC answers the announcement id of the block s for the receive
// r: it maps the block and copies what fits in r from it, or, where this
// rank cannot map it, answers with a clear-to-send (accept). It returns
// the error that failed the link, if any.
func (l *link) acceptIPC(r *request, tag int, id uint64, s memspace.Shared, inline bool) error {
	size := int(s.Len)
	var dst memspace.Block
	switch {
	case r.red != nil: // a reducing receive folds the stream
	case r.dev != nil:
		dst = r.dev.blk
	default:
		dst = bytesBlock(r.buf)
	}
	n := min(size, dst.Len())
	if n == 0 || l.closing() {
		return l.accept(r, tag, id, size, 0, inline)
	}
	imp, ok := memspace.ImporterFor(s, dst)
	if !ok {
		return l.refuseIPC(r, tag, id, s, inline, fmt.Errorf("no importer of %q", s.Kind))
	}
	src, done, err := l.importShared(imp, s)
	if err != nil {
		return l.refuseIPC(r, tag, id, s, inline, err)
	}
	if _, err := transfer.Lookup(dst.Space(), src.Space()); err != nil {
		// Mapped where no path reaches the receive's block from: the
		// bytes come through host memory, which both have paths to.
		done()
		return l.refuseIPC(r, tag, id, s, inline, err)
	}
	r.Flight.Matched()
	r.peer, r.tag, r.size, r.accept = l.peer, tag, size, n
	if !l.ipcGo(func() { l.copyIPC(r, id, dst, src, done) }) {
		done()
		r.complete(comm.Status{}, l.reqErr())
	}
	return nil
}

// refuseIPC answers the announcement id, which this rank cannot map (why),
// with a clear-to-send: the sender stages the block and streams it.
func (l *link) refuseIPC(r *request, tag int, id uint64, s memspace.Shared, inline bool, why error) error {
	l.c.logger().Debug("procs: device block from a peer staged: it cannot be mapped here", "rank", l.c.rank, "peer", l.peer, "block", s.String(), "err", why)
	l.c.notePath(l.peer, pathStaged)
	return l.accept(r, tag, id, int(s.Len), 0, inline)
}

// importShared maps s with imp and keeps the handle, to forget it when
// the peer frees the allocation or the link ends.
func (l *link) importShared(imp memspace.Importer, s memspace.Shared) (memspace.Block, func(), error) {
	l.ipc.mu.Lock()
	defer l.ipc.mu.Unlock()
	if l.ipc.closed {
		return memspace.Block{}, nil, l.reqErr()
	}
	b, done, err := imp.Import(s)
	if err != nil {
		return memspace.Block{}, nil, err
	}
	if b.Len() != int(s.Len) {
		done()
		return memspace.Block{}, nil, xerr.Detail(memspace.ErrInvalidArgument, "importer of %q mapped %v for %v", s.Kind, b, s)
	}
	if l.ipc.imported == nil {
		l.ipc.imported = map[string]memspace.Importer{}
	}
	l.ipc.imported[string(s.Handle)] = imp
	return b, done, nil
}

// copyIPC copies the r.accept bytes of the mapped src into dst, releases
// the mapping (done), answers the announcement id and completes r.
func (l *link) copyIPC(r *request, id uint64, dst, src memspace.Block, done func()) {
	n := r.accept
	cerr := copyPrefix(dst, src, n)
	done()
	if cerr != nil {
		_ = l.w.sendCtl(frame{typ: frameIPCDone, tag: ipcFailed, b: id}, false)
		r.complete(comm.Status{}, xerr.Op(Name, "recv", fmt.Errorf("copying %d bytes from rank %d's mapped memory into %v: %w", n, l.peer, dst, cerr)))
		return
	}
	if gone := l.peerGone(); gone != nil || l.closing() {
		// The peer may have stopped waiting for this message and reused
		// its block before the copy ended: the bytes are not sure.
		err := l.lostErr(gone)
		if gone == nil {
			err = l.reqErr()
		}
		r.complete(comm.Status{}, err)
		return
	}
	l.ipc.answered.Add(1)
	// A failure to queue means the link is down; the message is whole.
	_ = l.w.sendCtl(frame{typ: frameIPCDone, tag: ipcCopied, a: uint64(n), b: id}, false)
	l.c.notePath(l.peer, pathIPC)
	r.complete(p2p.Outcome(Name, l.c.rank, l.peer, r.tag, r.size, n))
}

// onIPCDone completes the send id, announced by description: the
// receiver copied taken bytes of it, or failed to.
func (l *link) onIPCDone(status uint32, taken int, id uint64) error {
	r, err := l.announcedLocked(id, "mapped copy")
	if r == nil {
		return err
	}
	if r.dev == nil || !r.dev.ipc {
		l.w.mu.Unlock()
		return xerr.Detail(ErrProtocol, "message %d copied from a mapping, which was announced by its bytes", id)
	}
	if taken > r.dev.blk.Len() {
		l.w.mu.Unlock()
		return xerr.Detail(ErrProtocol, "%d bytes copied of the %d-byte message %d", taken, r.dev.blk.Len(), id)
	}
	delete(l.w.announced, id)
	l.w.mu.Unlock()
	r.Flight.Matched()
	if status == ipcFailed {
		r.complete(comm.Status{}, xerr.Errorf(Name, "send", memspace.ErrDeviceLost, "rank %d: rank %d failed to copy the message from the mapping", l.c.rank, l.peer))
		return nil
	}
	l.c.notePath(l.peer, pathIPC)
	r.complete(p2p.SendStatus(r.peer, r.tag, r.dev.blk.Len()), nil)
	return nil
}

// refusedIPC takes the clear-to-send that answers the send r (announced
// by description: the receiver cannot map it) for accept bytes under
// token: it copies the block into a host stand-in, off the reader, and
// streams it. w.mu is held on entry and released.
func (l *link) refusedIPC(r *request, accept int, id, token uint64) error {
	if accept > r.dev.blk.Len() {
		l.w.mu.Unlock()
		return xerr.Detail(ErrProtocol, "clear-to-send for %d bytes of a %d-byte message", accept, r.dev.blk.Len())
	}
	delete(l.w.announced, id)
	r.Flight.Matched()
	r.token, r.accept = token, accept
	closed := l.w.closed
	l.w.mu.Unlock()
	l.c.notePath(l.peer, pathStaged)
	switch {
	case accept == 0:
		r.complete(p2p.SendStatus(r.peer, r.tag, r.dev.blk.Len()), nil)
		return nil
	case closed:
		r.complete(comm.Status{}, l.w.closedErr)
		return nil
	}
	if !l.ipcGo(func() { l.streamStaged(r) }) {
		r.complete(comm.Status{}, l.reqErr())
	}
	return nil
}

// streamStaged copies the block of the send r into a host stand-in and
// hands the stand-in to the writer, which streams r.accept bytes of it.
// A copy that fails (the device did) cuts the link: the peer waits for
// the bytes its clear-to-send asked for, and no frame takes that back.
func (l *link) streamStaged(r *request) {
	err := r.dev.stageIn()
	if err != nil {
		l.fail(fmt.Errorf("staging a device message the peer could not map: %w", err))
		r.complete(comm.Status{}, err)
		return
	}
	l.w.mu.Lock()
	if err := l.w.writable(); err != nil {
		l.w.mu.Unlock()
		r.complete(comm.Status{}, err)
		return
	}
	r.buf = hostView(r.dev.stand)
	l.w.bulk = append(l.w.bulk, r)
	l.w.mu.Unlock()
	l.w.kick()
}

// onForget forgets the allocation whose handle (n bytes) follows: the
// peer freed it.
func (l *link) onForget(n int) error {
	var h [memspace.MaxHandle]byte
	if _, err := io.ReadFull(l.rd.br, h[:n]); err != nil {
		return err
	}
	if l.shm == nil {
		return xerr.Detail(ErrProtocol, "a mapped allocation forgotten on a TCP link")
	}
	l.ipc.mu.Lock()
	imp := l.ipc.imported[string(h[:n])]
	delete(l.ipc.imported, string(h[:n]))
	l.ipc.mu.Unlock()
	if imp != nil {
		imp.Forget(bytes.Clone(h[:n]))
	}
	return nil
}

// sendForget tells the peer that the allocation of handle is freed.
func (l *link) sendForget(handle []byte) {
	f := &outFrame{payload: handle}
	frame{typ: frameForget, a: uint64(len(handle))}.encode(f.hdr[:])
	// A failure means the link is down: the peer forgets everything.
	_ = l.w.queueFrames([]*outFrame{f})
}

// devShares is what a rank shared of its allocations, to tell the peers
// that mapped one when it is freed: for each space that tells of frees
// (memspace.FreeNotifier), its subscription and the allocations shared,
// by their start.
type devShares struct {
	mu     sync.Mutex
	closed bool
	subs   map[any]func()
	allocs map[any]map[memspace.Addr]*sharedAlloc
}

// sharedAlloc is an allocation shared with peers.
type sharedAlloc struct {
	handle []byte
	size   int64
	peers  []int
}

// remember records that the allocation s describes (of buf) was shared
// with peer, when buf's space tells of frees; it subscribes to the space
// the first time.
func (ds *devShares) remember(c *Comm, buf memspace.Block, s memspace.Shared, peer int) {
	fn, ok := memspace.As[memspace.FreeNotifier](buf.Space())
	if !ok || !reflect.TypeOf(fn).Comparable() {
		return
	}
	key := any(fn)
	if !ds.subscribe(c, key, fn) {
		return
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.closed {
		return
	}
	base := buf.Addr() - memspace.Addr(s.Offset)
	m := ds.allocs[key]
	if m == nil {
		m = map[memspace.Addr]*sharedAlloc{}
		ds.allocs[key] = m
	}
	a := m[base]
	if a == nil || !bytes.Equal(a.handle, s.Handle) {
		a = &sharedAlloc{handle: bytes.Clone(s.Handle), size: s.Size}
		m[base] = a
	}
	if !slices.Contains(a.peers, peer) {
		a.peers = append(a.peers, peer)
	}
}

// subscribe subscribes to the frees of the space of key (fn) unless it
// is already; false once the rank is closed.
func (ds *devShares) subscribe(c *Comm, key any, fn memspace.FreeNotifier) bool {
	ds.mu.Lock()
	_, subscribed := ds.subs[key]
	closed := ds.closed
	ds.mu.Unlock()
	if closed || subscribed {
		return !closed
	}
	// Outside ds.mu: the space calls back under its own lock, and takes
	// ds.mu then.
	stop := fn.NotifyFree(func(b memspace.Block) { ds.freed(c, key, b) })
	ds.mu.Lock()
	_, dup := ds.subs[key]
	closed = ds.closed
	if !dup && !closed {
		if ds.subs == nil {
			ds.subs = map[any]func(){}
			ds.allocs = map[any]map[memspace.Addr]*sharedAlloc{}
		}
		ds.subs[key] = stop
	}
	ds.mu.Unlock()
	if dup || closed {
		stop()
	}
	return !closed
}

// freed tells every peer that mapped an allocation inside b, which the
// space of key frees, to forget it. It runs under the space's lock: it
// only queues frames.
func (ds *devShares) freed(c *Comm, key any, b memspace.Block) {
	type forget struct {
		peer   int
		handle []byte
	}
	var out []forget
	ds.mu.Lock()
	m := ds.allocs[key]
	end := b.Addr() + memspace.Addr(b.Len())
	take := func(base memspace.Addr, a *sharedAlloc) {
		for _, p := range a.peers {
			out = append(out, forget{p, a.handle})
		}
		delete(m, base)
	}
	if a := m[b.Addr()]; a != nil {
		take(b.Addr(), a)
	}
	if b.Len() > 0 {
		for base, a := range m {
			if base >= b.Addr() && base < end {
				take(base, a)
			}
		}
	}
	ds.mu.Unlock()
	for _, f := range out {
		if l := c.links[f.peer]; l != nil {
			l.sendForget(f.handle)
		}
	}
}

// close ends the subscriptions (Comm.Close).
func (ds *devShares) close() {
	ds.mu.Lock()
	ds.closed = true
	subs := ds.subs
	ds.subs, ds.allocs = nil, nil
	ds.mu.Unlock()
	for _, stop := range subs {
		stop()
	}
}

// ipcInfo describes how device messages travel, for the driver's Info.
func ipcInfo() string {
	return "device messages: mapped by the receiver (CUDA IPC) where the space shares its memory, else staged through host memory"
}
