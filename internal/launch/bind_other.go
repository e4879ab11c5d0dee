//go:build !linux

package launch

import (
	"runtime"

	"github.com/xpu-go/xpu/xerr"
)

var errNoBinding = xerr.Errorf(place, "", xerr.ErrNotSupported, "binding ranks to processors on %s", runtime.GOOS)

// processors cannot tell which processors a process may run on here.
func processors() ([]int, error) { return nil, errNoBinding }

// bindThread cannot bind a thread here.
func bindThread([]int) (func() error, error) { return nil, errNoBinding }
