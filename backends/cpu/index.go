package cpu

// index is an ordered map from start address to region: a treap (a binary
// search tree kept balanced in expectation by random heap priorities), so
// insert, delete and the floor search that Lookup needs are O(log n). The
// space's mutex guards it.
type index struct {
	root *node
	n    int
	seed uint64
}

type node struct {
	key         uintptr
	prio        uint64
	r           *region
	left, right *node
}

func (t *index) rand() uint64 {
	// xorshift64*: cheap, and good enough to balance a treap.
	if t.seed == 0 {
		t.seed = 0x9e3779b97f4a7c15
	}
	t.seed ^= t.seed >> 12
	t.seed ^= t.seed << 25
	t.seed ^= t.seed >> 27
	return t.seed * 2685821657736338717
}

// insert adds r under key; the key must not be present.
func (t *index) insert(key uintptr, r *region) {
	t.root = t.ins(t.root, &node{key: key, prio: t.rand(), r: r})
	t.n++
}

func (t *index) ins(h, x *node) *node {
	if h == nil {
		return x
	}
	if x.key < h.key {
		h.left = t.ins(h.left, x)
		if h.left.prio > h.prio {
			h = rotRight(h)
		}
	} else {
		h.right = t.ins(h.right, x)
		if h.right.prio > h.prio {
			h = rotLeft(h)
		}
	}
	return h
}

// remove deletes key and reports whether it was present.
func (t *index) remove(key uintptr) bool {
	var ok bool
	t.root, ok = del(t.root, key)
	if ok {
		t.n--
	}
	return ok
}

func del(h *node, key uintptr) (*node, bool) {
	if h == nil {
		return nil, false
	}
	var ok bool
	switch {
	case key < h.key:
		h.left, ok = del(h.left, key)
		return h, ok
	case key > h.key:
		h.right, ok = del(h.right, key)
		return h, ok
	}
	return merge(h.left, h.right), true
}

// merge joins two treaps whose keys are ordered (all of a before b).
func merge(a, b *node) *node {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.right = merge(a.right, b)
		return a
	default:
		b.left = merge(a, b.left)
		return b
	}
}

// floor returns the region with the greatest key <= key, or nil.
func (t *index) floor(key uintptr) *region {
	var best *region
	for h := t.root; h != nil; {
		if h.key <= key {
			best = h.r
			h = h.right
		} else {
			h = h.left
		}
	}
	return best
}

// get returns the region stored under exactly key, or nil.
func (t *index) get(key uintptr) *region {
	for h := t.root; h != nil; {
		switch {
		case key < h.key:
			h = h.left
		case key > h.key:
			h = h.right
		default:
			return h.r
		}
	}
	return nil
}

// each calls f for every region in key order.
func (t *index) each(f func(r *region)) { walk(t.root, f) }

func walk(h *node, f func(r *region)) {
	for h != nil {
		walk(h.left, f)
		f(h.r)
		h = h.right
	}
}

func rotRight(h *node) *node {
	x := h.left
	h.left = x.right
	x.right = h
	return x
}

func rotLeft(h *node) *node {
	x := h.right
	h.right = x.left
	x.left = h
	return x
}
