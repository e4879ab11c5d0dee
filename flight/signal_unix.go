//go:build unix

package flight

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// DumpSignal is the signal that makes a process whose environment names
// a DumpDir write its records there and go on: what `xpu run` sends its
// ranks when its --timeout expires. SIGQUIT writes them too, then lets Go
// print every goroutine's stack and exit, as it always does.
var DumpSignal os.Signal = syscall.SIGUSR2

// watcher makes DumpSignal and SIGQUIT write every open recorder's
// record into DumpDir while a recorder is open; after a SIGQUIT, it
// restores Go's own handling of the signal — a traceback of every
// goroutine and exit status 2 — and raises it again.
type watcher struct {
	ch   chan os.Signal
	done chan struct{}
}

func startWatch() *watcher {
	w := &watcher{ch: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(w.ch, syscall.SIGQUIT, DumpSignal)
	go w.run()
	return w
}

func (w *watcher) run() {
	defer close(w.done)
	for sig := range w.ch {
		reason := "timeout"
		if sig == syscall.SIGQUIT {
			reason = "SIGQUIT"
		}
		if dir := DumpDir(); dir != "" {
			if _, err := WriteAll(dir, reason); err != nil {
				fmt.Fprintf(os.Stderr, "xpu: flight record: %v\n", err)
			}
		}
		if sig == syscall.SIGQUIT {
			signal.Reset(syscall.SIGQUIT)
			_ = syscall.Kill(os.Getpid(), syscall.SIGQUIT)
			return
		}
	}
}

// stop gives the signals back to Go and waits for the goroutine to end.
func (w *watcher) stop() {
	if w == nil {
		return
	}
	signal.Stop(w.ch)
	close(w.ch)
	<-w.done
}
