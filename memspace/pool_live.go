package memspace

import "math/bits"

// liveMap maps the start address of each live pool allocation to its chunk.
// It is an open-addressing hash table with linear probing, Fibonacci
// hashing and backward-shift deletion (no tombstones), kept at most half
// full. It replaces a Go map on the pool's hot path, where it is several
// times cheaper: the keys are integers and the pool's mutex already guards
// it.
type liveMap struct {
	slots []liveSlot // len is a power of two; an empty slot has c == nil
	n     int
	shift uint // 64 - log2(len(slots))
}

type liveSlot struct {
	key Addr
	c   *chunk
}

const liveMapMin = 64

func (m *liveMap) home(a Addr) int {
	return int((uint64(a) * 0x9E3779B97F4A7C15) >> m.shift)
}

func (m *liveMap) get(a Addr) *chunk {
	if m.slots == nil {
		return nil
	}
	mask := len(m.slots) - 1
	for i := m.home(a); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.c == nil {
			return nil
		}
		if s.key == a {
			return s.c
		}
	}
}

// put adds a → c; a must not be present.
func (m *liveMap) put(a Addr, c *chunk) {
	if 2*(m.n+1) > len(m.slots) {
		m.resize(max(2*len(m.slots), liveMapMin))
	}
	mask := len(m.slots) - 1
	i := m.home(a)
	for m.slots[i].c != nil {
		i = (i + 1) & mask
	}
	m.slots[i] = liveSlot{key: a, c: c}
	m.n++
}

// del removes a, which must be present.
func (m *liveMap) del(a Addr) {
	mask := len(m.slots) - 1
	i := m.home(a)
	for m.slots[i].key != a || m.slots[i].c == nil {
		i = (i + 1) & mask
	}
	// Shift back the entries of the probe run that follows, so that no
	// lookup meets a hole before its key.
	for j := i; ; {
		j = (j + 1) & mask
		s := m.slots[j]
		if s.c == nil {
			break
		}
		k := m.home(s.key)
		// s may move to i unless its home lies cyclically in (i, j].
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		m.slots[i] = s
		i = j
	}
	m.slots[i] = liveSlot{}
	m.n--
}

func (m *liveMap) resize(n int) {
	old := m.slots
	m.slots = make([]liveSlot, n)
	m.shift = uint(64 - bits.Len(uint(n)-1))
	m.n = 0
	for _, s := range old {
		if s.c != nil {
			m.put(s.key, s.c)
		}
	}
}
