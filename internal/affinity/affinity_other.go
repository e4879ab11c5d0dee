//go:build !linux

package affinity

import (
	"fmt"
	"runtime"

	"github.com/xpu-go/xpu/xerr"
)

var errNo = fmt.Errorf("processor affinity on %s: %w", runtime.GOOS, xerr.ErrNotSupported)

// Of cannot tell here.
func Of(int) ([]int, error) { return nil, errNo }

// BindThread cannot bind a thread here.
func BindThread([]int) (func() error, error) { return nil, errNo }
