package procs

import (
	"encoding/binary"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// ErrProtocol reports a frame that breaks the wire protocol: an unknown
// type, a length over the receiver's limits, a reference to a message that
// does not exist. The link that carried it is cut, so operations with that
// peer fail with comm.ErrPeerLost (the error says why). It matches
// comm.ErrInvalidArgument too.
var ErrProtocol = xerr.ErrProtocol

// Frame types. Every frame starts with a fixed header of headerSize bytes
// (see docs/adr/0008-tcp-wire.md); eager and data frames carry a payload
// after it.
const (
	frameEager     uint8 = 1  // tag, a = payload length; payload follows
	frameRTS       uint8 = 2  // tag, a = message length, b = message id, c = address of the message (shared memory; 0: none)
	frameCTS       uint8 = 3  // a = bytes accepted, b = message id, c = token
	frameData      uint8 = 4  // a = payload length, b = token, c = offset; payload follows
	frameCancel    uint8 = 5  // b = message id
	frameCanceled  uint8 = 6  // b = message id
	frameCredit    uint8 = 7  // a = eager bytes given back
	frameHeartbeat uint8 = 8  // nothing
	frameBye       uint8 = 9  // nothing: the sender leaves, no frame follows
	frameAbort     uint8 = 10 // a = collective sequence number
	framePulled    uint8 = 11 // a = bytes taken, b = message id: the receiver copied them itself (single copy)
	framePut       uint8 = 12 // a = data length, b = transfer id, c = offset in the region; key and data follow
	frameGet       uint8 = 13 // a = data length, b = transfer id, c = offset in the region; key follows
	frameOneDone   uint8 = 14 // tag = answer (oneDone, oneRefused), a = data length, b = transfer id: a Put chunk
	frameOneData   uint8 = 15 // tag = answer, a = data length, b = transfer id: a Get chunk; data follows when in place
	framePutFrom   uint8 = 16 // a = length, b = transfer id, c = offset in the region; key and the origin's address follow: copy them from there
	frameGetAddr   uint8 = 17 // a = length, b = transfer id, c = offset in the region; key follows: lend the range
	frameOneAddr   uint8 = 18 // tag = answer, a = length, b = transfer id, c = address of the range lent (oneDone)
	frameOneFree   uint8 = 19 // b = transfer id: the range lent is copied
	frameNotify    uint8 = 20 // a = length; a notification follows (comm.Notifier)
	frameBatch     uint8 = 21 // tag = kind (batchGet, batchPut, batchGetStream, batchPutStream), a = descriptors, b = transfer id; the descriptors follow
	frameBatchDone uint8 = 22 // tag = answer, a = the descriptor refused, b = transfer id
	frameBatchData uint8 = 23 // a = length, b = transfer id: a chunk of a streamed batch of Puts follows
	frameIPC       uint8 = 24 // tag, a = message length, b = message id, c = description length; a device block's description follows (ipc.go)
	frameIPCDone   uint8 = 25 // tag = answer (ipcCopied, ipcFailed), a = bytes copied, b = message id: the receiver copied from its mapping
	frameForget    uint8 = 26 // a = handle length; the handle of an allocation freed follows: unmap it
	frameOneIPC    uint8 = 27 // a = transfer length, b = transfer id, c = payload length; a device origin block's description, the region's key, the offset and the operation follow (onesided_ipc.go)
	frameMax             = frameOneIPC
)

// headerSize is the length of a frame header.
const headerSize = 32

// maxMessage is the largest message length a rendezvous may announce.
const maxMessage = 1 << 48

// frame is a decoded header. Fields a type does not use are zero.
type frame struct {
	typ     uint8
	tag     uint32
	a, b, c uint64
}

// limits are what the receiving side accepts, checked by decodeFrame.
type limits struct {
	eager  int // largest eager payload
	chunk  int // largest data payload
	budget int // largest credit
}

// encode writes f into hdr (headerSize bytes).
func (f frame) encode(hdr []byte) {
	_ = hdr[headerSize-1]
	hdr[0] = f.typ
	hdr[1], hdr[2], hdr[3] = 0, 0, 0
	binary.LittleEndian.PutUint32(hdr[4:], f.tag)
	binary.LittleEndian.PutUint64(hdr[8:], f.a)
	binary.LittleEndian.PutUint64(hdr[16:], f.b)
	binary.LittleEndian.PutUint64(hdr[24:], f.c)
}

// uses says which of tag, a, b, c a frame type carries.
var uses = [frameMax + 1][4]bool{
	frameEager:     {true, true, false, false},
	frameRTS:       {true, true, true, true},
	frameCTS:       {false, true, true, true},
	frameData:      {false, true, true, true},
	frameCancel:    {false, false, true, false},
	frameCanceled:  {false, false, true, false},
	frameCredit:    {false, true, false, false},
	frameHeartbeat: {},
	frameBye:       {},
	frameAbort:     {false, true, false, false},
	framePulled:    {false, true, true, false},
	framePut:       {false, true, true, true},
	frameGet:       {false, true, true, true},
	frameOneDone:   {true, true, true, false},
	frameOneData:   {true, true, true, false},
	framePutFrom:   {false, true, true, true},
	frameGetAddr:   {false, true, true, true},
	frameOneAddr:   {true, true, true, true},
	frameOneFree:   {false, false, true, false},
	frameNotify:    {false, true, false, false},
	frameBatch:     {true, true, true, false},
	frameBatchDone: {true, true, true, false},
	frameBatchData: {false, true, true, false},
	frameIPC:       {true, true, true, true},
	frameIPCDone:   {true, true, true, false},
	frameForget:    {false, true, false, false},
	frameOneIPC:    {false, true, true, true},
}

// decodeFrame parses and checks a header against lim: a known type, zero
// padding and unused fields, a tag in the wire range, and lengths within
// what this side accepts — so a peer can never make it allocate more than
// its eager limit for one frame. It returns an error matching ErrProtocol.
func decodeFrame(hdr []byte, lim limits) (frame, error) {
	if len(hdr) != headerSize {
		return frame{}, xerr.Detail(ErrProtocol, "header of %d bytes, want %d", len(hdr), headerSize)
	}
	f := frame{
		typ: hdr[0],
		tag: binary.LittleEndian.Uint32(hdr[4:]),
		a:   binary.LittleEndian.Uint64(hdr[8:]),
		b:   binary.LittleEndian.Uint64(hdr[16:]),
		c:   binary.LittleEndian.Uint64(hdr[24:]),
	}
	if f.typ == 0 || f.typ > frameMax {
		return frame{}, xerr.Detail(ErrProtocol, "unknown frame type %d", f.typ)
	}
	if hdr[1] != 0 || hdr[2] != 0 || hdr[3] != 0 {
		return frame{}, xerr.Detail(ErrProtocol, "frame type %d with nonzero flags % x", f.typ, hdr[1:4])
	}
	u := uses[f.typ]
	for i, v := range [4]uint64{uint64(f.tag), f.a, f.b, f.c} {
		if !u[i] && v != 0 {
			return frame{}, xerr.Detail(ErrProtocol, "frame type %d with a value in unused field %d", f.typ, i)
		}
	}
	if u[0] && f.tag > comm.MaxReservedTag {
		return frame{}, xerr.Detail(ErrProtocol, "tag %d outside [0, %d]", f.tag, comm.MaxReservedTag)
	}
	switch f.typ {
	case frameEager:
		if f.a > uint64(lim.eager) {
			return frame{}, xerr.Detail(ErrProtocol, "eager message of %d bytes over the limit of %d", f.a, lim.eager)
		}
	case frameRTS:
		if f.a > maxMessage {
			return frame{}, xerr.Detail(ErrProtocol, "message of %d bytes announced", f.a)
		}
	case frameCTS:
		if f.a > maxMessage {
			return frame{}, xerr.Detail(ErrProtocol, "%d bytes accepted", f.a)
		}
	case framePulled:
		if f.a == 0 || f.a > maxMessage {
			return frame{}, xerr.Detail(ErrProtocol, "%d bytes pulled", f.a)
		}
	case frameData:
		if f.a == 0 || f.a > uint64(lim.chunk) {
			return frame{}, xerr.Detail(ErrProtocol, "data frame of %d bytes outside [1, %d]", f.a, lim.chunk)
		}
		if f.c > maxMessage {
			return frame{}, xerr.Detail(ErrProtocol, "data frame at offset %d", f.c)
		}
	case framePutFrom, frameGetAddr, frameOneAddr:
		if f.a == 0 || f.a > maxMessage || (f.typ != frameOneAddr && f.c > maxMessage) {
			return frame{}, xerr.Detail(ErrProtocol, "single-copy frame type %d of %d bytes at %d", f.typ, f.a, f.c)
		}
		if f.typ == frameOneAddr && f.tag > oneNoCopy {
			return frame{}, xerr.Detail(ErrProtocol, "one-sided answer %d", f.tag)
		}
	case frameOneDone:
		if f.a > maxMessage || f.tag > oneFailed {
			return frame{}, xerr.Detail(ErrProtocol, "one-sided answer %d for %d bytes", f.tag, f.a)
		}
	case framePut, frameGet, frameOneData:
		if f.a > uint64(lim.chunk) || f.c > maxMessage {
			return frame{}, xerr.Detail(ErrProtocol, "one-sided frame type %d of %d bytes at offset %d (chunks are at most %d)", f.typ, f.a, f.c, lim.chunk)
		}
		if f.typ == frameOneData && ((f.tag != oneDone && f.tag != oneRefused && f.tag != oneFailed) || (f.tag != oneDone && f.a != 0)) {
			return frame{}, xerr.Detail(ErrProtocol, "one-sided answer %d of %d bytes", f.tag, f.a)
		}
	case frameBatch:
		if f.tag > batchPutStream || f.a == 0 || f.a > batchMax {
			return frame{}, xerr.Detail(ErrProtocol, "a batch of %d descriptors (kind %d), outside [1, %d]", f.a, f.tag, batchMax)
		}
	case frameBatchData:
		if f.a == 0 || f.a > uint64(lim.chunk) {
			return frame{}, xerr.Detail(ErrProtocol, "a chunk of a batch of %d bytes, outside [1, %d]", f.a, lim.chunk)
		}
	case frameBatchDone:
		if f.tag > oneNoCopy || f.a >= batchMax {
			return frame{}, xerr.Detail(ErrProtocol, "batch answer %d for descriptor %d", f.tag, f.a)
		}
	case frameNotify:
		if f.a > comm.MaxNotification {
			return frame{}, xerr.Detail(ErrProtocol, "a notification of %d bytes, more than %d", f.a, comm.MaxNotification)
		}
	case frameIPC:
		if f.a > maxMessage || f.c < ipcFixed || f.c > ipcDescMax {
			return frame{}, xerr.Detail(ErrProtocol, "a device block of %d bytes with a description of %d bytes", f.a, f.c)
		}
	case frameOneIPC:
		if f.a > maxMessage || f.c < ipcFixed+oneIPCTrailer || f.c > ipcDescMax {
			return frame{}, xerr.Detail(ErrProtocol, "a one-sided transfer of a device block of %d bytes with %d bytes of description", f.a, f.c)
		}
	case frameIPCDone:
		if f.tag > ipcFailed || f.a > maxMessage || (f.tag == ipcFailed && f.a != 0) {
			return frame{}, xerr.Detail(ErrProtocol, "mapped copy answer %d for %d bytes", f.tag, f.a)
		}
	case frameForget:
		if f.a == 0 || f.a > memspace.MaxHandle {
			return frame{}, xerr.Detail(ErrProtocol, "a handle of %d bytes forgotten, outside [1, %d]", f.a, memspace.MaxHandle)
		}
	case frameCredit:
		if f.a == 0 || f.a > uint64(lim.budget) {
			return frame{}, xerr.Detail(ErrProtocol, "credit of %d bytes outside [1, %d]", f.a, lim.budget)
		}
	}
	return f, nil
}

// A frame header is what the shared-memory rings write as one piece
// (shm.Conn.TryWriteFrame).
var (
	_ [headerSize - shm.FrameHeader]byte
	_ [shm.FrameHeader - headerSize]byte
)
