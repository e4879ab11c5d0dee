// Package jointest is a helper of tests; tooling, not shipped by the
// library. It holds what the tests of joining (internal/join,
// backends/procs) share: a log that a progress goroutine writes while the
// test reads it.
package jointest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Log collects the lines of a slog text handler; safe for concurrent use.
// The zero Log is empty and ready.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger is a slog.Logger writing text lines to l.
func (l *Log) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
