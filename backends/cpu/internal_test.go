package cpu

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMemInfo(t *testing.T) {
	free, total, err := parseMemInfo([]byte("MemTotal:       24683620 kB\nMemFree:  100 kB\nMemAvailable:   24453580 kB\nbogus\nHugePages_Total: 0\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(24683620*1024), total)
	assert.Equal(t, int64(24453580*1024), free)
	free, total, err = parseMemInfo([]byte("MemTotal: x kB\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(-1), free)
	assert.Equal(t, int64(-1), total)
}

func TestParseCPUModel(t *testing.T) {
	assert.Equal(t, "AMD EPYC 9B45", parseCPUModel([]byte("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B45\n")))
	assert.Equal(t, "Raspberry Pi 4 Model B", parseCPUModel([]byte("processor\t: 0\nBogoMIPS\t: 108.00\n\nModel\t\t: Raspberry Pi 4 Model B\n")))
	assert.Equal(t, "", parseCPUModel([]byte("processor: 0\n")))
	assert.NotEmpty(t, cpuModel())
}

// The index stays ordered and balanced enough under many inserts and
// removals; floor finds the greatest key at or below.
func TestIndex(t *testing.T) {
	var ix index
	keys := map[uintptr]*region{}
	for i := uintptr(1); i <= 5000; i++ {
		k := (i * 7919) % 10007 * 16
		if _, dup := keys[k]; dup {
			continue
		}
		r := &region{user: int(k)}
		keys[k] = r
		ix.insert(k, r)
	}
	assert.Equal(t, len(keys), ix.n)
	for k, r := range keys {
		assert.Same(t, r, ix.get(k))
		assert.Same(t, r, ix.floor(k+15))
	}
	for k := range keys {
		if k%32 == 0 {
			require.True(t, ix.remove(k))
			delete(keys, k)
		}
	}
	assert.False(t, ix.remove(3))
	var prev uintptr
	count := 0
	ix.each(func(r *region) {
		assert.Greater(t, uintptr(r.user), prev)
		prev = uintptr(r.user)
		count++
	})
	assert.Equal(t, len(keys), count)
	assert.Less(t, depth(ix.root), 60, "expected O(log n) depth")
	assert.Nil(t, ix.floor(0))
}

func depth(n *node) int {
	if n == nil {
		return 0
	}
	return 1 + max(depth(n.left), depth(n.right))
}
