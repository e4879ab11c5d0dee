package rdma

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/xerr"
)

// The bootstrap. A rank joins its job through package join, as every
// multi-process transport does (the launcher's variables, rank 0's
// rendezvous store, the job secret's handshake), and gets one
// authenticated connection per peer. Over them the ranks exchange their
// connection managers' addresses, connect their queue pairs (connect.go),
// and wait for each other before they close them, so that a rank that
// failed to connect makes the others fail at once.

// jobConfig is how a rank joins its job: the job's formation, and whether
// the ranks of one machine may run their collectives in shared memory
// (XPU_LINKS is not "tcp") under which node name (XPU_NODE).
type jobConfig struct {
	form    join.Config
	shared  bool
	node    string
	shmSpin time.Duration // XPU_SHM_SPIN, as nodecoll.Options takes it
}

// jobFromEnv reads the job from the environment (join.FromEnv).
func jobFromEnv() (jobConfig, error) {
	e, err := join.FromEnv(Name, jobenv.OS)
	if err != nil {
		return jobConfig{}, err
	}
	links, err := shm.ParseLinks(os.Getenv(jobenv.Links))
	if err != nil {
		return jobConfig{}, xerr.Op(Name, "env", fmt.Errorf("%s: %w", jobenv.Links, err))
	}
	spin, err := jobenv.Spin(jobenv.OS, jobenv.ShmSpin, time.Second)
	if err != nil {
		return jobConfig{}, xerr.Op(Name, "env", err)
	}
	return jobConfig{
		form: join.Config{Rank: e.Rank, Size: e.Size, MasterAddr: e.MasterAddr, PortFrom: e.PortFrom,
			Secret: e.Secret, Timeout: e.JoinTimeout},
		shared:  links != shm.SocketOnly,
		node:    os.Getenv(jobenv.Node),
		shmSpin: cmp.Or(spin, shm.DefaultSpin),
	}, nil
}

// addrLen is the fixed size of an address in the exchange.
const addrLen = 64

// bootStep bounds each step of the bootstrap on one connection when the
// join timeout does not.
const bootStep = time.Minute

// onPeers runs f on the connection to every peer at once and returns the
// error of the lowest peer that failed, naming it.
func onPeers(ctx context.Context, job *join.Job, bound time.Duration, f func(peer int, conn net.Conn) error) error {
	var wg sync.WaitGroup
	errs := make([]error, job.Size)
	for j, p := range job.Peers {
		if p.Conn == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			clear := join.Bound(ctx, p.Conn, bound)
			defer clear()
			if err := f(j, p.Conn); err != nil {
				errs[j] = fmt.Errorf("rank %d: %w", j, err)
			}
		}()
	}
	wg.Wait()
	return cmp.Or(errs...)
}

// exchange sends this rank's address to every peer and returns every
// rank's, by rank.
func exchange(ctx context.Context, job *join.Job, mine string, bound time.Duration) ([]string, error) {
	if len(mine) >= addrLen {
		return nil, fmt.Errorf("address %q too long", mine)
	}
	out := make([]byte, addrLen)
	copy(out, mine)
	addrs := make([]string, job.Size)
	addrs[job.Rank] = mine
	err := onPeers(ctx, job, bound, func(peer int, conn net.Conn) error {
		if _, err := conn.Write(out); err != nil {
			return fmt.Errorf("send this rank's address: %w", err)
		}
		in := make([]byte, addrLen)
		if _, err := io.ReadFull(conn, in); err != nil {
			return fmt.Errorf("its address: %w", err)
		}
		addrs[peer] = string(in[:bytes.IndexByte(append(in, 0), 0)])
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("exchange addresses: %w", err)
	}
	return addrs, nil
}

// meet says to every peer that this rank is connected and waits until
// every peer says so.
func meet(ctx context.Context, job *join.Job, bound time.Duration) error {
	err := onPeers(ctx, job, bound, func(peer int, conn net.Conn) error {
		if _, err := conn.Write([]byte{1}); err != nil {
			return err
		}
		var b [1]byte
		if _, err := io.ReadFull(conn, b[:]); err != nil {
			return fmt.Errorf("left before it connected: %w", err)
		}
		return nil
	})
	return err
}
