package local_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// header of a test message: sender rank, sender goroutine, sequence number.
const hdr = 12

func encode(p []byte, rank, g, seq int) {
	binary.LittleEndian.PutUint32(p[0:], uint32(rank))
	binary.LittleEndian.PutUint32(p[4:], uint32(g))
	binary.LittleEndian.PutUint32(p[8:], uint32(seq))
	for i := hdr; i < len(p); i++ {
		p[i] = byte(seq + i)
	}
}

func decode(t *testing.T, p []byte) (rank, g, seq int) {
	rank = int(binary.LittleEndian.Uint32(p[0:]))
	g = int(binary.LittleEndian.Uint32(p[4:]))
	seq = int(binary.LittleEndian.Uint32(p[8:]))
	for i := hdr; i < len(p); i++ {
		if p[i] != byte(seq+i) {
			t.Errorf("message %d/%d/%d corrupt at byte %d", rank, g, seq, i)
			break
		}
	}
	return rank, g, seq
}

// msgSize varies message sizes around the eager limit of the order tests
// (64 bytes), so eager and rendezvous messages interleave on one stream.
func msgSize(seq int) int { return hdr + (seq*37)%120 }

// TestOrderWildcard: 8 sender goroutines (2 on each of 4 ranks, tags 0 and
// 1) send 1000 messages each to rank 4, which receives them all with
// AnySource/AnyTag from one goroutine and checks that each stream arrives in
// order and whole.
func TestOrderWildcard(t *testing.T) {
	const senders, perRank, msgs = 4, 2, 1000
	cs := group(t, senders+1, local.Options{EagerLimit: 64})
	ctx := testwait.Ctx(t)
	root := cs[senders]
	var wg sync.WaitGroup
	for r := range senders {
		for g := range perRank {
			wg.Go(func() {
				var reqs []comm.Request
				for seq := range msgs {
					p := make([]byte, msgSize(seq))
					encode(p, r, g, seq)
					req, err := cs[r].Isend(blk(t, p), root.Rank(), g)
					if !assert.NoError(t, err) {
						return
					}
					reqs = append(reqs, req)
				}
				assert.NoError(t, comm.WaitAll(ctx, reqs...))
			})
		}
	}
	next := map[[2]int]int{}
	buf := make([]byte, 256)
	for range senders * perRank * msgs {
		st, err := comm.Recv(ctx, root, blk(t, buf), comm.AnySource, comm.AnyTag)
		require.NoError(t, err)
		rank, g, seq := decode(t, buf[:st.Count])
		require.Equal(t, st.Source, rank)
		require.Equal(t, st.Tag, g)
		require.Equal(t, msgSize(seq), st.Count)
		key := [2]int{rank, g}
		require.Equal(t, next[key], seq, "stream %v out of order", key)
		next[key]++
	}
	testwait.Group(t, &wg, "the senders")
	for r := range senders {
		for g := range perRank {
			assert.Equal(t, msgs, next[[2]int{r, g}])
		}
	}
}

// TestAllToAllConcurrent: on each of 4 ranks, one sender goroutine per peer
// and tag and one receiver goroutine per peer and tag (specific source and
// tag), all at once; per stream order and completeness are checked.
func TestAllToAllConcurrent(t *testing.T) {
	const n, tags, msgs = 4, 2, 250
	for _, p := range []local.Options{{EagerLimit: 64}, {EagerLimit: -1}} {
		t.Run(fmt.Sprintf("eager=%d", p.EagerLimit), func(t *testing.T) {
			cs := group(t, n, p)
			ctx := testwait.Ctx(t)
			var wg sync.WaitGroup
			for src := range n {
				for dst := range n {
					for tag := range tags {
						wg.Go(func() {
							for seq := range msgs {
								p := make([]byte, msgSize(seq))
								encode(p, src, tag, seq)
								if !assert.NoError(t, comm.Send(ctx, cs[src], blk(t, p), dst, tag)) {
									return
								}
							}
						})
						wg.Go(func() {
							buf := make([]byte, 256)
							for seq := range msgs {
								st, err := comm.Recv(ctx, cs[dst], blk(t, buf), src, tag)
								if !assert.NoError(t, err) {
									return
								}
								rank, g, s := decode(t, buf[:st.Count])
								if !assert.Equal(t, []int{src, tag, seq}, []int{rank, g, s}) {
									return
								}
							}
						})
					}
				}
			}
			testwait.Group(t, &wg, "the pairs' senders and receivers")
		})
	}
}

// TestManyGoroutinesAnySource: several receiver goroutines share one rank,
// all receiving with AnySource; nothing is lost or duplicated.
func TestManyGoroutinesAnySource(t *testing.T) {
	const n, msgs, receivers = 4, 300, 4
	cs := group(t, n, local.Options{EagerLimit: 64})
	ctx := testwait.Ctx(t)
	var wg sync.WaitGroup
	for src := 1; src < n; src++ {
		wg.Go(func() {
			for seq := range msgs {
				p := make([]byte, msgSize(seq))
				encode(p, src, 0, seq)
				if !assert.NoError(t, comm.Send(ctx, cs[src], blk(t, p), 0, 3)) {
					return
				}
			}
		})
	}
	var mu sync.Mutex
	seen := map[[2]int]bool{}
	for range receivers {
		wg.Go(func() {
			buf := make([]byte, 256)
			for range (n - 1) * msgs / receivers {
				st, err := comm.Recv(ctx, cs[0], blk(t, buf), comm.AnySource, 3)
				if !assert.NoError(t, err) {
					return
				}
				rank, _, seq := decode(t, buf[:st.Count])
				assert.Equal(t, st.Source, rank)
				mu.Lock()
				assert.False(t, seen[[2]int{rank, seq}], "duplicate %d/%d", rank, seq)
				seen[[2]int{rank, seq}] = true
				mu.Unlock()
			}
		})
	}
	testwait.Group(t, &wg, "the receivers")
	assert.Len(t, seen, (n-1)*msgs)
}

// TestLargeMessage moves 64 MiB by rendezvous, and 8 MiB eagerly with a
// raised limit, checking every byte.
func TestLargeMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB message in -short mode")
	}
	for _, tc := range []struct {
		size int
		opts local.Options
	}{{64 << 20, local.Options{}}, {8 << 20, local.Options{EagerLimit: 8 << 20}}} {
		t.Run(fmt.Sprintf("size=%d/eager=%d", tc.size, tc.opts.EagerLimit), func(t *testing.T) {
			cs := group(t, 2, tc.opts)
			msg := bigPattern(tc.size)
			got := make([]byte, tc.size)
			sr := isend(t, cs[0], msg, 1, 1)
			_, done, _ := sr.Test()
			require.Equal(t, tc.opts.EagerLimit != 0, done, "eager sends complete at once, rendezvous ones wait")
			st, err := wait(t, irecv(t, cs[1], got, 0, 1))
			require.NoError(t, err)
			assert.Equal(t, tc.size, st.Count)
			_, err = wait(t, sr)
			require.NoError(t, err)
			require.True(t, bytes.Equal(msg, got), "large message differs")
		})
	}
}

// bigPattern returns n bytes (a multiple of 4 KiB) quickly, even under the
// race detector: 4 KiB chunks of a pattern, each stamped with its index so
// that a misplaced chunk is caught.
func bigPattern(n int) []byte {
	const chunk = 4 << 10
	p := make([]byte, n)
	base := pattern(chunk, 0x5a)
	for off := 0; off < n; off += chunk {
		copy(p[off:], base)
		binary.LittleEndian.PutUint64(p[off:], uint64(off/chunk))
	}
	return p
}
