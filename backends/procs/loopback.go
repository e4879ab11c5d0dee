package procs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/xerr"
)

// NewLoopbackGroup returns a job of n ranks in this process whose ranks
// talk over real TCP connections on 127.0.0.1, through the same rendezvous,
// handshake and wire protocol as separate processes, with a fresh random
// secret. Rank i is element i; Close every rank when done.
func NewLoopbackGroup(ctx context.Context, n int) ([]*Comm, error) {
	return NewLoopbackGroupConfig(ctx, n, Config{})
}

// NewLoopbackGroupConfig is NewLoopbackGroup with the tuning of tmpl
// (Timeout, EagerLimit, …); its Rank, Size, MasterAddr, Secret and
// Listener are ignored.
func NewLoopbackGroupConfig(ctx context.Context, n int, tmpl Config) ([]*Comm, error) {
	if n < 1 || n > MaxRanks {
		return nil, xerr.Errorf(Name, "loopback", comm.ErrInvalidArgument, "group of %d ranks outside [1, %d]", n, MaxRanks)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, xerr.Op(Name, "loopback", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, xerr.Op(Name, "loopback", fmt.Errorf("listen: %w", err))
	}
	out := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cfg := tmpl
		cfg.Rank, cfg.Size = i, n
		cfg.MasterAddr = ln.Addr().String()
		cfg.Secret = []byte(hex.EncodeToString(raw[:]))
		cfg.Listener = nil
		if tmpl.nodeOf != nil {
			cfg.Node = tmpl.nodeOf(i)
		}
		if i == 0 {
			cfg.Listener = ln
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = Dial(ctx, cfg)
		}()
	}
	wg.Wait()
	// The ranks fail for one cause: a bad template fails every rank alike,
	// and a rank that fails leaves the others waiting until ctx ends. The
	// first error that is not ctx's names it.
	err = cmp.Or(errs...)
	for _, e := range errs {
		if e != nil && !errors.Is(e, ctx.Err()) {
			err = e
			break
		}
	}
	if err != nil {
		for _, c := range out {
			if c != nil {
				_ = c.Close()
			}
		}
		return nil, err
	}
	return out, nil
}

// GroupFunc adapts NewLoopbackGroupConfig to a comm.GroupFunc.
func GroupFunc(tmpl Config) comm.GroupFunc {
	return func(ctx context.Context, n int) ([]comm.Comm, error) {
		cs, err := NewLoopbackGroupConfig(ctx, n, tmpl)
		if err != nil {
			return nil, err
		}
		out := make([]comm.Comm, n)
		for i, c := range cs {
			out[i] = c
		}
		return out, nil
	}
}
