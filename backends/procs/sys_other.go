//go:build !linux

package procs

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not offered: the
// heartbeat timeout alone bounds failure detection there.
func setUserTimeout(*net.TCPConn, time.Duration) {}

// spinRead reads without polling where the socket cannot be polled
// directly: Config.Spin has no effect there.
func (l *link) spinRead(p []byte) (int, error) { return l.conn.Read(p) }
