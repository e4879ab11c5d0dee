//go:build !linux

package chaos

import (
	"errors"
	"fmt"
	"os"
)

var errLinux = errors.New("chaos: runs on Linux only (/proc, process groups, network namespaces)")

// IsRole reports whether this process was started by Run as a launcher or a
// rank; never, here.
func IsRole() bool { return false }

// RunRole plays a role; there is none here.
func RunRole() int {
	fmt.Fprintln(os.Stderr, errLinux)
	return 2
}

// Run runs a chaos test; not here.
func Run(cfg Config) (*Report, error) { return nil, errLinux }
