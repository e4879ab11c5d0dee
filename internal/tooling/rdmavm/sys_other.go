//go:build !linux

package rdmavm

import (
	"context"
	"errors"
	"os/exec"
)

var errNotLinux = errors.New("needs Linux")

func startTied(*exec.Cmd) (<-chan error, error) { return nil, errNotLinux }

func lockFile(context.Context, string) (func(), error) { return nil, errNotLinux }
