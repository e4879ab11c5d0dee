package xerr_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/xerr"
)

// oneLine fails t when err's message spans several lines.
func oneLine(t *testing.T, err error) {
	t.Helper()
	assert.NotContains(t, err.Error(), "\n", "%q is not one line", err.Error())
}

func TestErrorf(t *testing.T) {
	err := xerr.Errorf("cpu", "alloc", xerr.ErrInvalidArgument, "size %d is not positive", 0)
	assert.Equal(t, "cpu alloc: size 0 is not positive: invalid argument", err.Error())
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument)
	assert.NotErrorIs(t, err, xerr.ErrOutOfMemory)
	oneLine(t, err)
	var xe *xerr.Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, xerr.Error{Backend: "cpu", Device: -1, Op: "alloc", Err: xe.Err}, *xe)

	// The args may wrap further errors, reachable too.
	err = xerr.Errorf("tcp", "dial", xerr.ErrPeerLost, "rank %d: %w", 3, io.ErrUnexpectedEOF)
	assert.Equal(t, "tcp dial: rank 3: unexpected EOF: peer lost", err.Error())
	assert.ErrorIs(t, err, xerr.ErrPeerLost)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	oneLine(t, err)

	// A Kind matches its parent through the error.
	k := xerr.NewKind("double free", xerr.ErrInvalidArgument)
	err = xerr.Errorf("cpu", "free", k, "block %#x", 0x1000)
	assert.Equal(t, "cpu free: block 0x1000: double free", err.Error())
	assert.ErrorIs(t, err, k)
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument)
}

func TestDetail(t *testing.T) {
	err := xerr.Detail(xerr.ErrInvalidArgument, "rank %d out of [0, %d)", 5, 4)
	assert.Equal(t, "rank 5 out of [0, 4): invalid argument", err.Error())
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument)
	oneLine(t, err)

	// Wrapped with its caller's place, the detail is named once.
	op := xerr.Op("local", "isend", err)
	assert.Equal(t, "local isend: rank 5 out of [0, 4): invalid argument", op.Error())
	assert.ErrorIs(t, op, xerr.ErrInvalidArgument)
}

func TestDev(t *testing.T) {
	err := xerr.Dev("cuda", 1, "alloc", xerr.Detail(xerr.ErrOutOfMemory, "%d bytes", 1<<30))
	assert.Equal(t, "cuda:1 alloc: 1073741824 bytes: out of memory", err.Error())
	assert.ErrorIs(t, err, xerr.ErrOutOfMemory)
	oneLine(t, err)
	var xe *xerr.Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, 1, xe.Device)
	assert.Equal(t, "cuda", xe.Backend)
	assert.Equal(t, "alloc", xe.Op)

	assert.Equal(t, "cuda:0 sync: device lost", xerr.Dev("cuda", 0, "sync", xerr.ErrDeviceLost).Error())
	assert.Nil(t, xerr.Dev("cuda", 0, "sync", nil))
}

func TestOp(t *testing.T) {
	assert.Nil(t, xerr.Op("cpu", "free", nil))
	err := xerr.Op("cpu", "free", xerr.ErrClosed)
	assert.Equal(t, "cpu free: use of closed component", err.Error())
	assert.ErrorIs(t, err, xerr.ErrClosed)
	// No operation: the backend alone names the place.
	assert.Equal(t, "faults: peer lost", xerr.Op("faults", "", xerr.ErrPeerLost).Error())
	// A nil cause still prints, on one line.
	assert.Equal(t, "x y: <nil>", (&xerr.Error{Backend: "x", Device: -1, Op: "y"}).Error())
}

// Every sentinel and every error built by the package prints one line.
func TestOneLine(t *testing.T) {
	sentinels := []error{xerr.ErrInvalidArgument, xerr.ErrOutOfMemory, xerr.ErrNotSupported, xerr.ErrUnavailable,
		xerr.ErrClosed, xerr.ErrPeerLost, xerr.ErrTruncated, xerr.ErrDeviceLost, xerr.ErrCanceled}
	seen := map[string]bool{}
	for _, s := range sentinels {
		oneLine(t, s)
		assert.False(t, seen[s.Error()], "two sentinels read %q", s.Error())
		seen[s.Error()] = true
		for _, err := range []error{
			xerr.Op("b", "op", s),
			xerr.Dev("b", 2, "op", s),
			xerr.Errorf("b", "op", s, "detail %s", "x"),
			xerr.Detail(s, "detail"),
		} {
			oneLine(t, err)
			assert.ErrorIs(t, err, s)
			assert.True(t, strings.HasSuffix(err.Error(), ": "+s.Error()), "%q: the sentinel comes last", err.Error())
			for _, other := range sentinels {
				if other != s {
					assert.NotErrorIs(t, err, other)
				}
			}
		}
	}
}

func TestKind(t *testing.T) {
	k := xerr.NewKind("sub", xerr.ErrInvalidArgument)
	assert.Equal(t, "sub", k.Error())
	assert.ErrorIs(t, k, k)
	assert.ErrorIs(t, k, xerr.ErrInvalidArgument)
	assert.ErrorIs(t, fmt.Errorf("wrapped: %w", k), xerr.ErrInvalidArgument)
	assert.NotErrorIs(t, k, xerr.ErrClosed)
	// A kind of a kind matches every ancestor.
	kk := xerr.NewKind("subsub", k)
	assert.ErrorIs(t, kk, k)
	assert.ErrorIs(t, kk, xerr.ErrInvalidArgument)
	// A kind without a parent matches itself only.
	lone := xerr.NewKind("lone", nil)
	assert.ErrorIs(t, lone, lone)
	assert.False(t, errors.Is(lone, xerr.ErrInvalidArgument))
}
