//go:build !linux

package tcp

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not offered: the
// heartbeat timeout alone bounds failure detection there.
func setUserTimeout(*net.TCPConn, time.Duration) {}
