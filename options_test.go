package xpu_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
)

// requireOptionError checks that err is the *OptionError of key with
// value, and that it matches ErrInvalidArgument and names both.
func requireOptionError(t *testing.T, err error, key, value string) {
	t.Helper()
	require.ErrorIs(t, err, xpu.ErrInvalidArgument)
	var oe *xpu.OptionError
	require.True(t, errors.As(err, &oe), "%v is not an *OptionError", err)
	assert.Equal(t, key, oe.Key)
	assert.Equal(t, value, oe.Value)
	assert.NotEmpty(t, oe.Want)
	assert.Contains(t, err.Error(), key)
	assert.Contains(t, err.Error(), fmt.Sprintf("%q", value))
}

func TestOptionsInt(t *testing.T) {
	n, err := xpu.Options{}.Int("n", 7)
	require.NoError(t, err)
	assert.Equal(t, 7, n, "absent key gives the default")
	n, err = xpu.Options(nil).Int("n", -3)
	require.NoError(t, err)
	assert.Equal(t, -3, n, "a nil Options has no keys")
	for in, want := range map[string]int{"0": 0, "42": 42, " -1 ": -1, "+5": 5, "9223372036854775807": math.MaxInt} {
		n, err := xpu.Options{"n": in}.Int("n", 7)
		require.NoError(t, err, in)
		assert.Equal(t, want, n, in)
	}
	for _, in := range []string{"", " ", "lots", "1.5", "0x10", "1e3", "12abc", "9223372036854775808"} {
		n, err := xpu.Options{"n": in}.Int("n", 7)
		requireOptionError(t, err, "n", in)
		assert.Equal(t, 7, n, in)
	}
}

func TestOptionsDuration(t *testing.T) {
	d, err := xpu.Options{"other": "x"}.Duration("t", time.Second)
	require.NoError(t, err)
	assert.Equal(t, time.Second, d)
	for in, want := range map[string]time.Duration{"0": 0, "250ms": 250 * time.Millisecond, " 3s ": 3 * time.Second, "1h30m": 90 * time.Minute, "-2s": -2 * time.Second} {
		d, err := xpu.Options{"t": in}.Duration("t", time.Second)
		require.NoError(t, err, in)
		assert.Equal(t, want, d, in)
	}
	for _, in := range []string{"", "soon", "3", "3 s", "1y"} {
		_, err := xpu.Options{"t": in}.Duration("t", time.Second)
		requireOptionError(t, err, "t", in)
	}
}

func TestOptionsBool(t *testing.T) {
	b, err := xpu.Options{}.Bool("b", true)
	require.NoError(t, err)
	assert.True(t, b)
	for in, want := range map[string]bool{"true": true, " TRUE ": true, "1": true, "t": true, "false": false, "0": false, "F": false} {
		b, err := xpu.Options{"b": in}.Bool("b", !want)
		require.NoError(t, err, in)
		assert.Equal(t, want, b, in)
	}
	for _, in := range []string{"", "yes", "maybe", "2"} {
		_, err := xpu.Options{"b": in}.Bool("b", false)
		requireOptionError(t, err, "b", in)
	}
}

func TestOptionsBytes(t *testing.T) {
	n, err := xpu.Options{}.Bytes("size", 99)
	require.NoError(t, err)
	assert.Equal(t, int64(99), n)
	for in, want := range map[string]int64{
		"0": 0, "12": 12, "12B": 12, "1k": 1 << 10, "1KB": 1 << 10, "1KiB": 1 << 10, "2 kib": 2 << 10,
		" 5 MiB ": 5 << 20, "3m": 3 << 20, "7G": 7 << 30, "1gb": 1 << 30, "1T": 1 << 40, "2P": 2 << 50,
		"8191P": 8191 << 50, "9223372036854775807": math.MaxInt64,
	} {
		n, err := xpu.Options{"size": in}.Bytes("size", 99)
		require.NoError(t, err, in)
		assert.Equal(t, want, n, in)
	}
	for _, in := range []string{
		"", "K", "-1", "-1K", "+1K", "1X", "1.5G", "1E", "1KX", "1iB", "1 K B", "1KiBs",
		"8192P", "9223372036854775807K", "9223372036854775808",
	} {
		n, err := xpu.Options{"size": in}.Bytes("size", 99)
		requireOptionError(t, err, "size", in)
		assert.Equal(t, int64(99), n, in)
	}
}

func TestOptionsInvalid(t *testing.T) {
	err := xpu.Options{"workers": "0"}.Invalid("workers", "an integer in [1, 8]")
	requireOptionError(t, err, "workers", "0")
	assert.Equal(t, `option workers="0": want an integer in [1, 8]`, err.Error())
}

// A driver reads its options with the typed accessors, checks ranges
// itself, and reports every bad value the same way.
func ExampleOptions_Int() {
	opts := xpu.Options{"workers": "4", "timeout": "250ms", "limit": "64MiB", "hugepages": "yes"}

	workers, err := opts.Int("workers", 1)
	fmt.Println(workers, err)
	timeout, err := opts.Duration("timeout", time.Second)
	fmt.Println(timeout, err)
	limit, err := opts.Bytes("limit", 0)
	fmt.Println(limit, err)
	ranks, err := opts.Int("ranks", 2) // absent: the default
	fmt.Println(ranks, err)

	_, err = opts.Bool("hugepages", false)
	fmt.Println(err, errors.Is(err, xpu.ErrInvalidArgument))
	if workers > 2 {
		fmt.Println(opts.Invalid("workers", "an integer in [1, 2]"))
	}
	// Output:
	// 4 <nil>
	// 250ms <nil>
	// 67108864 <nil>
	// 2 <nil>
	// option hugepages="yes": want true or false true
	// option workers="4": want an integer in [1, 2]
}
