package tcp

import (
	"net"
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
