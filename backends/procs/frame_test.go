package procs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/memspace"
)

var fuzzLimits = limits{eager: 64 << 10, chunk: 256 << 10, budget: 4 << 20}

func encoded(f frame) []byte {
	b := make([]byte, headerSize)
	f.encode(b)
	return b
}

// validFrames has one well-formed frame of each type.
var validFrames = []frame{
	{typ: frameEager, tag: 7, a: 100},
	{typ: frameEager, tag: comm.MaxReservedTag, a: 0},
	{typ: frameRTS, tag: 3, a: 1 << 30, b: 9},
	{typ: frameRTS, tag: 3, a: 1 << 30, b: 9, c: 0x7f12_3456_7000},
	{typ: frameCTS, a: 1 << 20, b: 9, c: 4},
	{typ: frameData, a: 4096, b: 4, c: 8192},
	{typ: frameCancel, b: 9},
	{typ: frameCanceled, b: 9},
	{typ: frameCredit, a: 1 << 20},
	{typ: frameHeartbeat},
	{typ: frameBye},
	{typ: frameAbort, a: 12},
	{typ: framePulled, a: 1 << 20, b: 9},
	{typ: frameIPC, tag: 5, a: 1 << 30, b: 9, c: ipcFixed + 8 + 64},
	{typ: frameIPCDone, tag: ipcCopied, a: 1 << 20, b: 9},
	{typ: frameIPCDone, tag: ipcFailed, b: 9},
	{typ: frameForget, a: 64},
	{typ: frameOneIPC, a: 1 << 20, b: 9, c: ipcFixed + 8 + 64 + oneIPCTrailer},
}

func TestDecodeFrameRoundTrip(t *testing.T) {
	for _, f := range validFrames {
		got, err := decodeFrame(encoded(f), fuzzLimits)
		require.NoError(t, err, "%+v", f)
		require.Equal(t, f, got)
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	flags := encoded(frame{typ: frameHeartbeat})
	flags[2] = 1
	bigTag := encoded(frame{typ: frameEager})
	binary.LittleEndian.PutUint32(bigTag[4:], comm.MaxReservedTag+1)
	for name, hdr := range map[string][]byte{
		"nil":               nil,
		"short":             make([]byte, headerSize-1),
		"long":              append(encoded(frame{typ: frameHeartbeat}), 0),
		"type 0":            make([]byte, headerSize),
		"type 99":           encoded(frame{typ: 99}),
		"flags":             flags,
		"tag out of range":  bigTag,
		"unused field":      encoded(frame{typ: frameHeartbeat, a: 1}),
		"tag on a cts":      encoded(frame{typ: frameCTS, tag: 1}),
		"eager over limit":  encoded(frame{typ: frameEager, a: 64<<10 + 1}),
		"absurd eager":      encoded(frame{typ: frameEager, a: 1 << 62}),
		"absurd message":    encoded(frame{typ: frameRTS, a: 1 << 62}),
		"empty data":        encoded(frame{typ: frameData, b: 1}),
		"data over chunk":   encoded(frame{typ: frameData, a: 256<<10 + 1, b: 1}),
		"credit over limit": encoded(frame{typ: frameCredit, a: 4<<20 + 1}),
		"zero credit":       encoded(frame{typ: frameCredit}),
		"empty pull":        encoded(frame{typ: framePulled, b: 9}),
		"absurd pull":       encoded(frame{typ: framePulled, a: 1 << 62, b: 9}),
		"token on a pull":   encoded(frame{typ: framePulled, a: 8, b: 9, c: 1}),
		"short description": encoded(frame{typ: frameIPC, a: 8, b: 9, c: ipcFixed - 1}),
		"long description":  encoded(frame{typ: frameIPC, a: 8, b: 9, c: ipcDescMax + 1}),
		"absurd device":     encoded(frame{typ: frameIPC, a: 1 << 62, b: 9, c: ipcFixed + 2}),
		"unknown answer":    encoded(frame{typ: frameIPCDone, tag: 2, a: 8, b: 9}),
		"failed with bytes": encoded(frame{typ: frameIPCDone, tag: ipcFailed, a: 8, b: 9}),
		"empty forget":      encoded(frame{typ: frameForget}),
		"one-sided, no key": encoded(frame{typ: frameOneIPC, a: 8, b: 9, c: ipcFixed + 2}),
		"one-sided, long":   encoded(frame{typ: frameOneIPC, a: 8, b: 9, c: ipcDescMax + 1}),
		"one-sided, tagged": encoded(frame{typ: frameOneIPC, tag: 1, a: 8, b: 9, c: ipcFixed + 2 + oneIPCTrailer}),
		"long forget":       encoded(frame{typ: frameForget, a: 129}),
	} {
		_, err := decodeFrame(hdr, fuzzLimits)
		require.ErrorIs(t, err, ErrProtocol, name)
		require.ErrorIs(t, err, comm.ErrInvalidArgument, name)
	}
}

// FuzzDecodeFrame feeds arbitrary headers to the decoder: it never panics,
// what it accepts re-encodes to the same bytes (no two encodings of one
// frame, no ignored garbage), and no accepted frame carries a length, an
// offset, a tag or a value in an unused field outside what the limits
// allow.
//
// The fuzzer's input is cut or zero-padded to headerSize bytes, the only
// length the link ever decodes (TestDecodeFrameRejects covers the others).
// Passing inputs of any length stalled the fuzzer: the error for a wrong
// length formats len(hdr), and fmt's per-digit loop is instrumented, so every
// new number of digits counted as new coverage; the fuzzer then tried to
// minimize such inputs (often kilobytes long) while keeping that coverage,
// which no shorter input can, and its quadratic subset search kept both
// workers busy for the whole -fuzzminimizetime at ~0 exec/s.
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range validFrames {
		f.Add(encoded(fr))
	}
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n....."))
	f.Add(bytes.Repeat([]byte{0xff}, headerSize))
	f.Add(make([]byte, headerSize))
	f.Fuzz(func(t *testing.T, in []byte) {
		var buf [headerSize]byte
		copy(buf[:], in)
		hdr := buf[:]
		fr, err := decodeFrame(hdr, fuzzLimits)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not match ErrProtocol", err)
			}
			if fr != (frame{}) {
				t.Fatalf("error %v returned with frame %+v", err, fr)
			}
			return
		}
		if !bytes.Equal(encoded(fr), hdr) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", hdr, fr, encoded(fr))
		}
		if fr.typ == 0 || fr.typ > frameMax {
			t.Fatalf("frame type %d accepted", fr.typ)
		}
		u := uses[fr.typ]
		for i, v := range [4]uint64{uint64(fr.tag), fr.a, fr.b, fr.c} {
			if !u[i] && v != 0 {
				t.Fatalf("%+v accepted with a value in unused field %d", fr, i)
			}
		}
		if fr.tag > comm.MaxReservedTag {
			t.Fatalf("tag %d accepted", fr.tag)
		}
		switch fr.typ {
		case frameEager:
			if fr.a > uint64(fuzzLimits.eager) {
				t.Fatalf("eager payload of %d accepted", fr.a)
			}
		case frameRTS, frameCTS, framePulled:
			if fr.a > maxMessage || fr.typ == framePulled && fr.a == 0 {
				t.Fatalf("%+v accepted: message over %d bytes", fr, uint64(maxMessage))
			}
		case frameData:
			if fr.a == 0 || fr.a > uint64(fuzzLimits.chunk) {
				t.Fatalf("data payload of %d accepted", fr.a)
			}
			if fr.c > maxMessage {
				t.Fatalf("data at offset %d accepted", fr.c)
			}
		case frameCredit:
			if fr.a == 0 || fr.a > uint64(fuzzLimits.budget) {
				t.Fatalf("credit of %d accepted", fr.a)
			}
		}
	})
}

// TestSharedWire: a block's description travels whole, and a description
// that is cut, padded, or names a range outside its allocation is a
// protocol violation.
func TestSharedWire(t *testing.T) {
	s := memspace.Shared{Kind: "cuda-ipc", Handle: bytes.Repeat([]byte{7}, memspace.MaxHandle), Size: 1 << 30, Offset: 4096, Len: 1 << 20}
	p := encodeShared(s)
	require.LessOrEqual(t, len(p), ipcDescMax)
	got, err := decodeShared(p, int(s.Len))
	require.NoError(t, err)
	require.Equal(t, s, got)
	for name, in := range map[string][]byte{
		"cut":     p[:len(p)-1],
		"padded":  append(bytes.Clone(p), 0),
		"fixed":   p[:ipcFixed-1],
		"no kind": encodeShared(memspace.Shared{Handle: []byte{1}, Size: 8, Len: 8}),
	} {
		_, err := decodeShared(in, 8)
		require.ErrorIs(t, err, ErrProtocol, name)
	}
	_, err = decodeShared(p, 1<<30)
	require.ErrorIs(t, err, ErrProtocol, "a range outside the allocation")
}
