package launch

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// output is the destination of every rank's lines. One lock covers both
// streams, so that lines of different ranks and streams never interleave
// even when stdout and stderr are the same terminal or buffer.
type output struct {
	mu     sync.Mutex
	stdout io.Writer
	stderr io.Writer
	err    error // first write error, kept for no one but tests and debugging
}

func newOutput(stdout, stderr io.Writer) *output {
	return &output{stdout: stdout, stderr: stderr}
}

// write writes p, whole lines, to w under the lock. A write error is kept,
// not returned: a rank's output that cannot be shown must not block the
// rank (a reader that stops reading would fill its pipe and hang it).
func (o *output) write(w io.Writer, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := w.Write(p); err != nil && o.err == nil {
		o.err = err
	}
}

// line writes s and a newline to w.
func (o *output) line(w io.Writer, s string) {
	o.write(w, []byte(s+"\n"))
}

// lineWriter is one stream of one rank: it cuts what the rank writes into
// lines and writes them to the output with the rank's prefix. exec.Cmd
// calls Write from one goroutine per stream; flush is called after Wait.
type lineWriter struct {
	out     *output
	w       io.Writer
	prefix  []byte
	partial []byte // the start of a line not yet ended
	batch   []byte // reused to build one Write of complete lines
	max     int
	tail    *tail // the last lines, kept for the report of a failure; nil keeps none
}

func newLineWriter(out *output, w io.Writer, prefix string) *lineWriter {
	return &lineWriter{out: out, w: w, prefix: []byte(prefix), max: MaxLine}
}

// Write never fails: see output.write.
func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	l.batch = l.batch[:0]
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		end := i
		if i < 0 {
			end = len(p)
		}
		if room := l.max - len(l.partial); end > room {
			// A line too long to hold is cut: its first MaxLine bytes
			// become a line of their own.
			l.emit(p[:room])
			p = p[room:]
			continue
		}
		if i < 0 {
			l.partial = append(l.partial, p...)
			break
		}
		l.emit(p[:i])
		p = p[i+1:]
	}
	if len(l.batch) > 0 {
		l.out.write(l.w, l.batch)
	}
	if cap(l.batch) > 4*l.max {
		l.batch = nil // do not keep a huge buffer after a burst
	}
	return n, nil
}

// emit adds the partial line, ended by rest, to the batch.
func (l *lineWriter) emit(rest []byte) {
	l.batch = append(l.batch, l.prefix...)
	l.batch = append(l.batch, l.partial...)
	l.batch = append(l.batch, rest...)
	l.batch = append(l.batch, '\n')
	l.tail.add(l.partial, rest)
	l.partial = l.partial[:0]
}

// flush writes the last line when it has no newline, completing it with one.
func (l *lineWriter) flush() {
	if len(l.partial) == 0 {
		return
	}
	b := make([]byte, 0, len(l.prefix)+len(l.partial)+1)
	b = append(b, l.prefix...)
	b = append(b, l.partial...)
	b = append(b, '\n')
	l.out.write(l.w, b)
	l.tail.add(l.partial, nil)
	l.partial = nil
}

// tailLineMax is the most bytes of a line a tail keeps.
const tailLineMax = 1 << 10

// tail keeps the last lines of a stream, each cut to tailLineMax bytes, in
// a ring; and the first line that began a Go panic or fatal error, which a
// long trace may push out of the ring. A nil *tail keeps nothing.
type tail struct {
	mu    sync.Mutex // add runs on the stream's copier, lines on Run's loop
	ring  []string
	next  int // where the next line goes
	full  bool
	panic string
}

func newTail(n int) *tail { return &tail{ring: make([]string, n)} }

// add keeps the line a+b.
func (t *tail) add(a, b []byte) {
	if t == nil || len(t.ring) == 0 {
		return
	}
	line := make([]byte, 0, min(len(a)+len(b), tailLineMax))
	line = append(line, a[:min(len(a), tailLineMax)]...)
	line = append(line, b[:min(len(b), tailLineMax-len(line))]...)
	s := string(line)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.panic == "" && (strings.HasPrefix(s, "panic: ") || strings.HasPrefix(s, "fatal error: ")) {
		t.panic = s
	}
	t.ring[t.next] = s
	t.next = (t.next + 1) % len(t.ring)
	t.full = t.full || t.next == 0
}

// lines returns the lines kept, oldest first, and the panic line.
func (t *tail) lines() (lines []string, panicLine string) {
	if t == nil {
		return nil, ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.full {
		lines = append(lines, t.ring[t.next:]...)
	}
	return append(lines, t.ring[:t.next]...), t.panic
}
