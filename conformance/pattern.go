package conformance

import (
	"context"
	"fmt"
	"sync"

	"github.com/xpu-go/xpu/memspace"
)

// patternPeriod is the period of bigPattern: a prime, so that no
// displacement a copy's arithmetic makes (multiples of pieces, of cache
// lines, of powers of two) is a multiple of it below 64 GiB.
const patternPeriod = 1_000_003

// patternBase is one period of bigPattern: bytes of a linear congruential
// generator, taken from the top of its state.
var patternBase = sync.OnceValue(func() []byte {
	b := make([]byte, patternPeriod)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x = x*6364136223846793005 + 1442695040888963407
		b[i] = byte(x >> 56)
	}
	return b
})

// bigPattern returns n bytes for seed, for large blocks: it repeats only
// every patternPeriod bytes, where pattern repeats every 64 KiB and so
// cannot tell a piece of a large copy from the same piece put 64 KiB (or
// 512 KiB, or 16 MiB) away. Seeds shift the pattern, so two seeds differ in
// almost every byte. It costs one memmove per period, not a loop over n.
func bigPattern(seed, n int) []byte {
	base := patternBase()
	p := make([]byte, n)
	off := (seed*104729%patternPeriod + patternPeriod) % patternPeriod
	k := copy(p, base[off:])
	for k < n {
		k += copy(p[k:], base)
	}
	return p
}

// probe is the part of a large block the space cases write and read back:
// its first and last probeLen bytes. Touching all of a 64 MiB block would
// cost more than the check is worth; the ends show that the block is the
// memory it claims to be.
const probeLen = 4096

// probeRanges returns the [lo, hi) ranges of a block of n bytes that are
// probed: the whole block when it is small.
func probeRanges(n int) [][2]int {
	if n <= 2*probeLen {
		return [][2]int{{0, n}}
	}
	return [][2]int{{0, probeLen}, {n - probeLen, n}}
}

// writeProbe writes the probed ranges of b with the pattern of seed.
func writeProbe(ctx context.Context, io blockIO, b memspace.Block, seed int) error {
	for i, r := range probeRanges(b.Len()) {
		sub, err := b.Slice(r[0], r[1]-r[0])
		if err != nil {
			return err
		}
		if err := io.write(ctx, sub, bigPattern(seed*3+i, r[1]-r[0])); err != nil {
			return err
		}
	}
	return nil
}

// checkProbe describes how the probed ranges of b differ from what
// writeProbe wrote with seed, or returns "".
func checkProbe(ctx context.Context, io blockIO, b memspace.Block, seed int) (string, error) {
	for i, r := range probeRanges(b.Len()) {
		sub, err := b.Slice(r[0], r[1]-r[0])
		if err != nil {
			return "", err
		}
		got, err := io.read(ctx, sub)
		if err != nil {
			return "", err
		}
		if d := diff(bigPattern(seed*3+i, r[1]-r[0]), got); d != "" {
			return fmt.Sprintf("bytes [%d, %d): %s", r[0], r[1], d), nil
		}
	}
	return "", nil
}
