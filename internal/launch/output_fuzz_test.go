package launch

import (
	"bytes"
	"testing"
)

// FuzzLineWriter writes what a rank prints (bytes from another process,
// through a pipe) to a rank's line writer in pieces the fuzzer chooses, on
// two streams that share one output, and checks the output: every line
// starts with its rank's prefix and ends with a newline, no line is longer
// than the prefix and the limit, no byte is lost, added or reordered within
// a stream (the lines of a stream, without their prefixes and with the
// newlines of cut lines dropped, are what was written), and lines of the
// two streams never interleave mid-line.
//
// The input is: a byte that sets the line limit (1 … 64, small so that
// short inputs cut lines), then chunks, each a length byte (bit 7: which
// stream) and that many bytes. Bytes past maxLineProg are ignored: every
// loop here runs more often on a longer input, which the fuzzer counts as
// new coverage that no shorter input keeps, and its minimization of such an
// input (a quadratic search, an execution per candidate) would hold a
// worker for the whole -fuzzminimizetime at no executions per second.
func FuzzLineWriter(f *testing.F) {
	f.Add([]byte("\x08\x05hello\x85world\x03!\n\n\x0alast line"))
	f.Add([]byte("\x03\x0aabcdefghij\x01\n"))
	f.Add([]byte("\x40\x00\x80\x01\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		in = in[:min(len(in), maxLineProg)]
		max := int(in[0]%64) + 1
		in = in[1:]
		var got bytes.Buffer
		out := newOutput(&got, &got)
		ws := [2]*lineWriter{newLineWriter(out, out.stdout, "[0] "), newLineWriter(out, out.stderr, "[1] ")}
		for _, w := range ws {
			w.max = max
		}
		var sent [2][]byte
		for len(in) > 0 {
			s, n := int(in[0]>>7), int(in[0]&0x7f)
			p := in[1:min(1+n, len(in))]
			in = in[len(p)+1:]
			sent[s] = append(sent[s], p...)
			if k, err := ws[s].Write(p); k != len(p) || err != nil {
				t.Fatalf("Write of %d bytes returned %d, %v", len(p), k, err)
			}
		}
		ws[0].flush()
		ws[1].flush()

		var lines [2][][]byte
		rest := got.Bytes()
		for len(rest) > 0 {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				t.Fatalf("output ends without a newline: %q", rest)
			}
			line := rest[:i]
			rest = rest[i+1:]
			s := -1
			for k, w := range ws {
				if bytes.HasPrefix(line, w.prefix) {
					s = k
				}
			}
			if s < 0 {
				t.Fatalf("line %q has no rank prefix", line)
			}
			body := line[len(ws[s].prefix):]
			if len(body) > max {
				t.Fatalf("line of %d bytes with a limit of %d", len(body), max)
			}
			lines[s] = append(lines[s], body)
		}
		for s := range 2 {
			if !reassembles(lines[s], sent[s], max) {
				t.Fatalf("stream %d: wrote %q, got lines %q (limit %d)", s, sent[s], lines[s], max)
			}
		}
	})
}

// maxLineProg is the longest input FuzzLineWriter runs.
const maxLineProg = 256

// reassembles reports whether lines, the output of one stream, are what
// was sent, cut at each newline (which is dropped) and after max bytes of a
// line with more to come; a last line without a newline is completed.
func reassembles(lines [][]byte, sent []byte, max int) bool {
	for i, l := range lines {
		if !bytes.HasPrefix(sent, l) {
			return false
		}
		sent = sent[len(l):]
		switch {
		case len(sent) > 0 && sent[0] == '\n':
			sent = sent[1:]
		case len(l) == max:
			// Cut at the limit.
		case len(sent) == 0 && i == len(lines)-1 && len(l) > 0:
			// The last line, completed by flush.
		default:
			return false
		}
	}
	return len(sent) == 0
}
