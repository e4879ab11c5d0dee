package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// sameSpace reports whether a and b are the same space, without panicking
// on spaces of incomparable dynamic types.
func sameSpace(a, b memspace.Space) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	return a == b
}

// pattern returns n bytes that depend on seed and on the position, so that
// a misplaced, shifted or stale byte is seen.
func pattern(seed, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*131 + (i>>8)*7 + seed*29 + 1)
	}
	return p
}

// blockIO reads and writes blocks of one space from the host: directly
// when the space is host-accessible, else through transfer.CopyBlock to and
// from Go memory.
type blockIO struct {
	space  memspace.Space
	direct bool
}

// newBlockIO returns the way to reach sp's memory from the host, or the
// reason there is none.
func newBlockIO(sp memspace.Space) (blockIO, string) {
	if sp.Properties().HostAccessible {
		return blockIO{space: sp, direct: true}, ""
	}
	if _, err := transfer.Lookup(memspace.GoHeap, sp); err != nil {
		return blockIO{}, fmt.Sprintf("space %s is not host-accessible and has no transfer path to host memory: %v", sp.Name(), err)
	}
	if _, err := transfer.Lookup(sp, memspace.GoHeap); err != nil {
		return blockIO{}, fmt.Sprintf("space %s is not host-accessible and has no transfer path from host memory: %v", sp.Name(), err)
	}
	return blockIO{space: sp}, ""
}

func (io blockIO) write(ctx context.Context, b memspace.Block, data []byte) error {
	if len(data) != b.Len() {
		return fmt.Errorf("conformance: writing %d bytes into a %d-byte block", len(data), b.Len())
	}
	if io.direct {
		dst, err := b.Bytes()
		if err != nil {
			return fmt.Errorf("host view of %v in host-accessible space %s: %w", b, io.space.Name(), err)
		}
		if len(dst) != len(data) {
			return fmt.Errorf("host view of %v has %d bytes", b, len(dst))
		}
		copy(dst, data)
		return nil
	}
	src, err := memspace.FromSlice(data)
	if err != nil {
		return err
	}
	if err := transfer.CopyBlock(ctx, b, src.Block()); err != nil {
		return fmt.Errorf("copy host -> %v: %w", b, err)
	}
	return nil
}

func (io blockIO) read(ctx context.Context, b memspace.Block) ([]byte, error) {
	if io.direct {
		src, err := b.Bytes()
		if err != nil {
			return nil, fmt.Errorf("host view of %v in host-accessible space %s: %w", b, io.space.Name(), err)
		}
		if len(src) != b.Len() {
			return nil, fmt.Errorf("host view of %v has %d bytes", b, len(src))
		}
		return bytes.Clone(src), nil
	}
	out := make([]byte, b.Len())
	dst, err := memspace.FromSlice(out)
	if err != nil {
		return nil, err
	}
	if err := transfer.CopyBlock(ctx, dst.Block(), b); err != nil {
		return nil, fmt.Errorf("copy %v -> host: %w", b, err)
	}
	return out, nil
}

// diff describes the first difference between want and got, or "".
func diff(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	if len(want) != len(got) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			n := 0
			for j := i; j < len(want); j++ {
				if want[j] != got[j] {
					n++
				}
			}
			return fmt.Sprintf("%d of %d bytes differ, the first at offset %d (got %#02x, want %#02x)", n, len(want), i, got[i], want[i])
		}
	}
	return ""
}

// isCtxErr reports whether err is the error of a done context.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// safeName turns a space name into one element of a test name.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, s)
	if s == "" {
		return "unnamed"
	}
	return s
}

// isPow2 reports whether n is a positive power of two.
func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }
