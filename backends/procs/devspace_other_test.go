//go:build !linux

package procs_test

import (
	"fmt"
	"runtime"

	"github.com/xpu-go/xpu/xerr"
)

// devSpaceMissing says why the device double cannot run here: its
// memory is anonymous memory files (memfd_create) that other processes
// open through /proc.
var devSpaceMissing = "the test device space needs Linux's memory files and /proc, not " + runtime.GOOS

func memfdCreate(string) (int, error) {
	return -1, fmt.Errorf("%s: %w", devSpaceMissing, xerr.ErrNotSupported)
}
