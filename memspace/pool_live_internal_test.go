package memspace

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiveMapAgainstGoMap drives the live table and a Go map with the same
// random puts and deletes, with keys that collide often (few distinct
// multiples of 512 in a narrow range, as pool addresses are), and checks
// they always agree.
func TestLiveMapAgainstGoMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var m liveMap
	ref := map[Addr]*chunk{}
	require.Nil(t, m.get(0x1000), "an empty table")
	keys := make([]Addr, 0, 512)
	for step := range 20000 {
		k := Addr(1<<40 + 512*rng.IntN(4096))
		if c, ok := ref[k]; ok {
			require.Same(t, c, m.get(k))
			m.del(k)
			delete(ref, k)
			require.Nil(t, m.get(k))
		} else if len(ref) < 1500 {
			c := &chunk{addr: k}
			m.put(k, c)
			ref[k] = c
			keys = append(keys, k)
		}
		if step%500 == 0 {
			require.Equal(t, len(ref), m.n)
			for _, k := range keys {
				require.True(t, ref[k] == m.get(k), "key %#x", k)
			}
			require.LessOrEqual(t, 2*m.n, len(m.slots), "at most half full")
		}
	}
}
