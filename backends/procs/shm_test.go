package procs_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// TestLinksChosen: ranks of one node link through shared memory unless
// told otherwise, ranks of different nodes through TCP, and Transport
// says which.
func TestLinksChosen(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  procs.Config
		want func(i, j int) string
	}{
		"auto": {procs.Config{}, func(i, j int) string { return procs.TransportShm }},
		"tcp":  {procs.Config{Links: procs.LinkTCP}, func(i, j int) string { return procs.TransportTCP }},
		"mixed": {procs.WithNodes(procs.Config{}, func(r int) string { return strconv.Itoa(r / 2) }), func(i, j int) string {
			if i/2 == j/2 {
				return procs.TransportShm
			}
			return procs.TransportTCP
		}},
	} {
		t.Run(name, func(t *testing.T) {
			cs := group(t, 4, tc.cfg)
			for i, c := range cs {
				for j := range cs {
					want := tc.want(i, j)
					if i == j {
						want = procs.TransportSelf
					}
					require.Equal(t, want, c.Transport(j), "rank %d to rank %d", i, j)
				}
				require.Empty(t, c.Transport(4))
			}
		})
	}
}

// dialEach forms a job of len(cfgs) ranks in this process, rank i with
// cfgs[i], and returns each rank's Dial result.
func dialEach(t *testing.T, cfgs []procs.Config) ([]*procs.Comm, []error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, errs := make([]*procs.Comm, len(cfgs)), make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		cfg.Rank, cfg.Size, cfg.MasterAddr, cfg.Secret = i, len(cfgs), ln.Addr().String(), []byte("links test")
		cfg.JoinTimeout = 5 * time.Second
		if i == 0 {
			cfg.Listener = ln
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[i], errs[i] = procs.Dial(ctx, cfg)
		}()
	}
	testwait.Group(t, &wg, "the ranks' Dials")
	t.Cleanup(func() {
		for _, c := range cs {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	return cs, errs
}

// TestLinksForced: a rank that forces shared memory cannot join a rank of
// another node, nor one that forces TCP; the error says why. Forcing TCP
// against a rank that allows both gives TCP.
func TestLinksForced(t *testing.T) {
	_, errs := dialEach(t, []procs.Config{{Links: procs.LinkShm, Node: "a"}, {Node: "b"}})
	require.ErrorIs(t, errors.Join(errs...), xpu.ErrUnavailable)
	require.ErrorContains(t, errors.Join(errs...), "different nodes")

	_, errs = dialEach(t, []procs.Config{{Links: procs.LinkTCP}, {Links: procs.LinkShm}})
	require.ErrorIs(t, errors.Join(errs...), xpu.ErrInvalidArgument)
	require.ErrorContains(t, errors.Join(errs...), "forces shared memory")

	cs, errs := dialEach(t, []procs.Config{{Links: procs.LinkTCP}, {}})
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, procs.TransportTCP, cs[1].Transport(0))
}

// TestShmCorruptRing: a ring whose producer index is impossible (a faulty
// or hostile peer) cuts the link with ErrProtocol; the receive waiting on
// it fails with ErrPeerLost, and nothing is read out of bounds.
func TestShmCorruptRing(t *testing.T) {
	cs := group(t, 2, procs.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cs[0].Irecv(bytesBlock(make([]byte, 8)), 1, 3)
	require.NoError(t, err)
	require.True(t, procs.CorruptShm(cs[0], 1))
	_, err = comm.Await(ctx, r)
	require.ErrorIs(t, err, comm.ErrPeerLost)
	require.ErrorIs(t, err, procs.ErrProtocol)
}

// TestShmDescriptorsClosed: while a group's links are up, after messages
// and a collective, no descriptor of the project's memory files (the
// links' segments, the node's region) is open: each creator closes its
// own once the peers have mapped the file, so that the memory lives only
// as long as the mappings. Counting after Close cannot see a descriptor
// kept until then.
func TestShmDescriptorsClosed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the segments are memory files of Linux, found through /proc/self/fd")
	}
	if fds := memFiles(t); len(fds) != 0 {
		t.Errorf("%d descriptors of xpu-shm memory files open before the group formed, left by an earlier test (%s)",
			len(fds), strings.Join(fds, ", "))
	}
	cs := group(t, 3, procs.Config{Links: procs.LinkShm})
	each(t, cs, func(ctx context.Context, c *procs.Comm) error { return checkedAllreduce(ctx, c, 1000, 0) })
	var links []string
	for i, c := range cs {
		for j := i + 1; j < len(cs); j++ {
			links = append(links, fmt.Sprintf("%d-%d over %s", i, j, c.Transport(j)))
		}
	}
	if fds := memFiles(t); len(fds) != 0 {
		t.Fatalf("%d descriptors of xpu-shm memory files open while the links %s are up (%s): a creator kept its descriptor after its peers attached, or an earlier test leaked it",
			len(fds), strings.Join(links, ", "), strings.Join(fds, ", "))
	}
}

// memFiles returns this process's open descriptors of the project's memory
// files (memfd_create's "xpu-shm"), each as its number and its target.
func memFiles(t *testing.T) []string {
	t.Helper()
	d, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var fds []string
	for _, e := range d {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed meanwhile (the directory's own descriptor)
		}
		if strings.HasPrefix(target, "/memfd:xpu-shm") {
			fds = append(fds, "fd "+e.Name()+" -> "+target)
		}
	}
	return fds
}

// TestShmNothingLeft: groups linked through shared memory leave no
// descriptor open, no segment mapped and nothing in /dev/shm once closed.
func TestShmNothingLeft(t *testing.T) {
	fds := func() int {
		d, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(d)
	}
	// The mappings of the links' segments and of the node's region.
	mapped := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		require.NoError(t, err)
		return strings.Count(string(b), "memfd:xpu-shm")
	}
	before, shmBefore, mapsBefore := fds(), devShm(t), mapped()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		cs, err := procs.NewLoopbackGroupConfig(ctx, 4, procs.Config{})
		require.NoError(t, err)
		go func() { _ = comm.Send(ctx, cs[3], bytesBlock([]byte("x")), 0, 1) }()
		_, err = comm.Recv(ctx, cs[0], bytesBlock(make([]byte, 1)), 3, 1)
		require.NoError(t, err)
		for _, c := range cs {
			require.NoError(t, c.Close())
		}
	}
	require.Equal(t, shmBefore, devShm(t))
	require.Equal(t, mapsBefore, mapped(), "segments still mapped after Close")
	// Sockets closed by Close may take a moment to leave the table.
	require.Eventually(t, func() bool { return fds() <= before }, 5*time.Second, 10*time.Millisecond)
}
