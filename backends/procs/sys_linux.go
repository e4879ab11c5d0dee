package procs

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"time"
)

// tcpUserTimeout is TCP_USER_TIMEOUT of <netinet/tcp.h> (not in package
// syscall): how long written data may stay unacknowledged before the
// kernel aborts the connection.
const tcpUserTimeout = 18

// setUserTimeout bounds how long written data may go unacknowledged, so
// that a write to a peer behind a cut link fails within d.
func setUserTimeout(tc *net.TCPConn, d time.Duration) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d.Milliseconds()))
	})
}

// spinRead reads into p like conn.Read, but first polls the socket for up
// to Config.Spin, so that a message arriving meanwhile is read without the
// wake-up of a blocked read. A kick (a read deadline in the past) ends the
// wait as in conn.Read, once the poll is over.
func (l *link) spinRead(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	polled := false
	err := l.rd.raw.Read(func(fd uintptr) bool {
		var end time.Time
		for {
			k, e := syscall.Read(int(fd), p)
			switch {
			case k > 0:
				n = k
				return true
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
			case e != nil:
				rerr = e
				return true
			default: // k == 0: the peer closed its side
				rerr = io.EOF
				return true
			}
			if polled {
				return false // wait for the poller
			}
			if end.IsZero() {
				end = time.Now().Add(l.c.cfg.Spin)
			} else if time.Now().After(end) {
				polled = true
				return false
			}
			// Let other goroutines (the peer's, in one process) have
			// this thread between polls.
			runtime.Gosched()
		}
	})
	if err != nil {
		return n, err
	}
	return n, rerr
}
