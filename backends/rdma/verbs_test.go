//go:build rdma

package rdma_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/internal/launch"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/memspace"
)

// These tests run on the kernel's verbs: on a machine with an RDMA device
// (or soft-RoCE), and in make test inside the qemu guest that
// guest_test.go boots. Each skips, saying why, where no device is.

func TestVerbsReceiverStops(t *testing.T) { testReceiverStops(t, verbsKit(t)) }
func TestVerbsKillMidAllreduce(t *testing.T) {
	testKillMidAllreduce(t, verbsKit(t))
}
func TestVerbsCorruptMessage(t *testing.T) { testCorruptMessage(t, verbsKit(t)) }
func TestVerbsFailedLink(t *testing.T)     { testFailedLink(t, verbsKit(t)) }
func TestVerbsStranger(t *testing.T)       { testStranger(t, verbsKit(t)) }
func TestVerbsShakenOrder(t *testing.T)    { testShakenOrder(t, verbsKit(t)) }

// TestVerbsConformance runs the communicator suite over groups of ranks in
// this process, each rank on its own device context and queue pairs.
func TestVerbsConformance(t *testing.T) {
	k := verbsKit(t)
	conformance.TestComm(t, func(t *testing.T, n int) []comm.Comm {
		cs := make([]comm.Comm, n)
		for i, c := range k.groupNoCleanup(t, n, rdma.Config{}) {
			cs[i] = c
		}
		return cs
	}, conformance.MaxRanks(4))
}

// Multi-process tests: this test binary started again as the ranks of a
// job, envRole saying what each does.
const envRole = "XPU_RDMA_TEST_ROLE"

// TestRank is the body of a rank process; it skips unless envRole is set.
func TestRank(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("runs only as a rank of the multi-process tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := rdma.FromEnv(ctx)
	require.NoError(t, err)
	defer c.Close()
	// The ranks run on one machine: their collectives run in shared
	// memory unless the links are forced to TCP.
	onNode := os.Getenv("XPU_LINKS") != "tcp"
	require.Equal(t, onNode, c.OneNode(), "collectives in shared memory")
	switch role {
	case "conformance":
		conformance.TestCommRank(t, c, conformance.MaxRanks(c.Size()))
	case "until-lost":
		v := make([]float64, 1<<17)
		b, _ := memspace.FromSlice(v)
		for i := 0; ; i++ {
			if err := comm.Allreduce(ctx, c, b, b, comm.Sum); err != nil {
				if errors.Is(err, comm.ErrPeerLost) {
					fmt.Println("LOST", err)
					return
				}
				t.Fatalf("allreduce #%d: %v", i, err)
			}
			if i == 2 {
				fmt.Println("READY")
			}
		}
	default:
		t.Fatalf("unknown role %q", role)
	}
}

// linkModes are the two ways ranks of one machine run their collectives:
// in shared memory (the default), or over the queue pairs (XPU_LINKS=tcp).
var linkModes = []struct{ name, env string }{
	{"collectives=shared-memory", "XPU_LINKS=auto"},
	{"collectives=queue-pairs", "XPU_LINKS=tcp"},
}

// TestMultiProcessConformance runs the suite with one process per rank,
// joined as xpu run joins them: the launcher's variables, the rendezvous
// store, the job secret; once with the collectives in shared memory, once
// over the queue pairs.
func TestMultiProcessConformance(t *testing.T) {
	verbsKit(t)
	if os.Getenv(envRole) != "" {
		t.Skip("a rank does not launch")
	}
	for _, m := range linkModes {
		t.Run(m.name, func(t *testing.T) {
			var out strings.Builder
			res, err := launch.Run(t.Context(), launch.Spec{
				N: 3, Prog: os.Args[0], Args: []string{"-test.run=^TestRank$", "-test.v"},
				Env: append(os.Environ(), envRole+"=conformance", m.env), MasterAddr: "127.0.0.1",
				Timeout: 5 * time.Minute, Stdout: &out, Stderr: &out,
			})
			t.Log(out.String())
			require.NoError(t, err)
			for _, s := range res.Ranks {
				require.True(t, s.OK(), "rank %d: %v", s.Rank, s)
			}
		})
	}
}

// TestMultiProcessKill runs a job of 4 rank processes doing allreduces,
// SIGKILLs rank 2 in the middle, and checks that every survivor's
// allreduce fails with ErrPeerLost within the bound: in shared memory and
// over the queue pairs.
func TestMultiProcessKill(t *testing.T) {
	verbsKit(t)
	if os.Getenv(envRole) != "" {
		t.Skip("a rank does not launch")
	}
	for _, m := range linkModes {
		t.Run(m.name, func(t *testing.T) { testMultiProcessKill(t, m.env) })
	}
}

func testMultiProcessKill(t *testing.T, linkEnv string) {
	const n, victim, bound = 4, 2, 10 * time.Second
	port, err := launch.FreePort("127.0.0.1")
	require.NoError(t, err)
	secret := launch.NewSecret()
	type rank struct {
		cmd   *exec.Cmd
		lines chan string
	}
	ranks := make([]rank, n)
	for i := range ranks {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRank$")
		cmd.Env = append(os.Environ(), envRole+"=until-lost", linkEnv,
			"XPU_RANK="+strconv.Itoa(i), "XPU_WORLD_SIZE="+strconv.Itoa(n),
			"XPU_MASTER_ADDR=127.0.0.1", "XPU_MASTER_PORT="+strconv.Itoa(port), "XPU_JOB_SECRET="+secret)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := make(chan string, 100)
		go scanLines(stdout, lines)
		ranks[i] = rank{cmd, lines}
	}
	defer func() {
		for _, r := range ranks {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	}()
	for i, r := range ranks {
		expect(t, i, r.lines, "READY", 2*time.Minute)
	}
	killed := time.Now()
	require.NoError(t, ranks[victim].cmd.Process.Kill())
	for i, r := range ranks {
		if i == victim {
			continue
		}
		expect(t, i, r.lines, "LOST", bound)
		t.Logf("rank %d saw the loss %v after the kill", i, time.Since(killed).Round(time.Millisecond))
	}
}

func scanLines(r io.Reader, out chan<- string) {
	defer close(out)
	s := bufio.NewScanner(r)
	for s.Scan() {
		out <- s.Text()
	}
}

func expect(t *testing.T, rank int, lines <-chan string, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("rank %d exited before saying %s", rank, want)
			}
			if strings.HasPrefix(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("rank %d did not say %s within %v", rank, want, within)
		}
	}
}

// TestVerbsDriver opens the driver on the device: Info lists it with its
// port, a group works.
func TestVerbsDriver(t *testing.T) {
	verbsKit(t)
	in, err := xpu.Describe(t.Context(), rdma.Name)
	require.NoError(t, err)
	require.True(t, in.Available, in.Reason)
	require.NotEmpty(t, in.Devices)
	t.Logf("%s: %s", in.Devices[0].Name, in.Devices[0].Summary())
	for _, p := range in.Devices[0].Ports {
		t.Logf("  %s", p)
	}
	b, err := xpu.Open(t.Context(), rdma.Name, nil)
	require.NoError(t, err)
	defer b.Close()
	ranks, err := b.Group(t.Context(), 2)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var rerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		in := make([]byte, 5)
		_, rerr = comm.Recv(t.Context(), ranks[1], blk(in), 0, 1)
		if rerr == nil && string(in) != "hello" {
			rerr = fmt.Errorf("got %q", in)
		}
	}()
	require.NoError(t, comm.Send(testwait.Ctx(t), ranks[0], blk([]byte("hello")), 1, 1))
	testwait.Group(t, &wg, "the receiving rank")
	require.NoError(t, rerr)
}
