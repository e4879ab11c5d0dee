//go:build !linux

package launch

import (
	"fmt"
	"runtime"

	"github.com/xpu-go/xpu/xerr"
)

var errNoBinding = fmt.Errorf("binding ranks to processors on %s: %w", runtime.GOOS, xerr.ErrNotSupported)

// processors cannot tell which processors a process may run on here.
func processors() ([]int, error) { return nil, errNoBinding }

// bindThread cannot bind a thread here.
func bindThread([]int) (func() error, error) { return nil, errNoBinding }
