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

// readerErr checks that r.Err() is the *OptionError of key with value,
// matching ErrInvalidArgument, on one line.
func readerErr(t *testing.T, r *xpu.OptionReader, key, value string) *xpu.OptionError {
	t.Helper()
	err := r.Err()
	requireOptionError(t, err, key, value)
	assert.NotContains(t, err.Error(), "\n")
	var oe *xpu.OptionError
	require.ErrorAs(t, err, &oe)
	return oe
}

func TestReaderAbsent(t *testing.T) {
	for _, opts := range []xpu.Options{nil, {}} {
		r := opts.Reader("cpu")
		assert.Equal(t, 7, r.Int("n", 7, 1, 8), "the default is returned as given")
		assert.Equal(t, -1, r.Int("m", -1, 1, 8), "even out of range")
		assert.Equal(t, int64(99), r.Bytes("size", 99, 0, 100))
		assert.Equal(t, time.Second, r.Duration("t", time.Second, 0, time.Hour))
		assert.True(t, r.Bool("b", true))
		assert.Equal(t, "tree", r.Choice("alg", "tree", "ring", "tree"))
		assert.NoError(t, r.Err())
	}
}

func TestReaderInt(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "42": 42, " -1 ": -1, "+5": 5, "9223372036854775807": math.MaxInt} {
		r := xpu.Options{"n": in}.Reader("x")
		assert.Equal(t, want, r.Int("n", 7, math.MinInt, math.MaxInt), in)
		require.NoError(t, r.Err(), in)
	}
	for _, in := range []string{"", " ", "lots", "1.5", "0x10", "1e3", "12abc", "9223372036854775808"} {
		r := xpu.Options{"n": in}.Reader("x")
		assert.Equal(t, 7, r.Int("n", 7, math.MinInt, math.MaxInt), in)
		readerErr(t, r, "n", in)
	}
	// The range is checked, inclusive, and named.
	for in, ok := range map[string]bool{"0": false, "1": true, "64": true, "65": false, "-3": false} {
		r := xpu.Options{"workers": in}.Reader("cpu")
		n := r.Int("workers", 4, 1, 64)
		if ok {
			require.NoError(t, r.Err(), in)
			assert.Equal(t, in, fmt.Sprint(n))
			continue
		}
		assert.Equal(t, 4, n, in)
		oe := readerErr(t, r, "workers", in)
		assert.Equal(t, "an integer in [1, 64]", oe.Want)
		assert.Equal(t, `option workers="`+in+`": want an integer in [1, 64]`, r.Err().Error())
	}
}

func TestReaderBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "12": 12, "12B": 12, "1k": 1 << 10, "1KB": 1 << 10, "1KiB": 1 << 10, "2 kib": 2 << 10,
		" 5 MiB ": 5 << 20, "3m": 3 << 20, "7G": 7 << 30, "1gb": 1 << 30, "1T": 1 << 40, "2P": 2 << 50,
		"8191P": 8191 << 50, "9223372036854775807": math.MaxInt64,
	} {
		r := xpu.Options{"size": in}.Reader("x")
		assert.Equal(t, want, r.Bytes("size", 99, 0, math.MaxInt64), in)
		require.NoError(t, r.Err(), in)
	}
	for _, in := range []string{
		"", "K", "-1", "-1K", "+1K", "1X", "1.5G", "1E", "1KX", "1iB", "1 K B", "1KiBs",
		"8192P", "9223372036854775807K", "9223372036854775808",
	} {
		r := xpu.Options{"size": in}.Reader("x")
		assert.Equal(t, int64(99), r.Bytes("size", 99, 0, math.MaxInt64), in)
		readerErr(t, r, "size", in)
	}
	// Out of range: the bounds are written as sizes.
	for _, in := range []string{"0", "4095", "2G", "1025M"} {
		r := xpu.Options{"limit": in}.Reader("cpu")
		assert.Equal(t, int64(0), r.Bytes("limit", 0, 4096, 1<<30), in)
		oe := readerErr(t, r, "limit", in)
		assert.Equal(t, `a size in bytes from 4 KiB to 1 GiB, such as "4096" or "64K"`, oe.Want, in)
	}
	r := xpu.Options{"limit": "1G"}.Reader("cpu")
	assert.Equal(t, int64(1<<30), r.Bytes("limit", 0, 1, 1<<30), "the upper bound is inclusive")
	assert.NoError(t, r.Err())
}

func TestReaderDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "250ms": 250 * time.Millisecond, " 3s ": 3 * time.Second, "1h30m": 90 * time.Minute, "-2s": -2 * time.Second} {
		r := xpu.Options{"t": in}.Reader("x")
		assert.Equal(t, want, r.Duration("t", time.Second, -time.Hour, 2*time.Hour), in)
		require.NoError(t, r.Err(), in)
	}
	for _, in := range []string{"", "soon", "3", "3 s", "1y"} {
		r := xpu.Options{"t": in}.Reader("x")
		assert.Equal(t, time.Second, r.Duration("t", time.Second, -time.Hour, time.Hour), in)
		readerErr(t, r, "t", in)
	}
	for _, in := range []string{"0", "99ms", "10m1s"} {
		r := xpu.Options{"timeout": in}.Reader("tcp")
		r.Duration("timeout", time.Second, 100*time.Millisecond, 10*time.Minute)
		oe := readerErr(t, r, "timeout", in)
		assert.Equal(t, "a duration from 100ms to 10m0s", oe.Want)
	}
}

func TestReaderBool(t *testing.T) {
	for in, want := range map[string]bool{"true": true, " TRUE ": true, "1": true, "t": true, "false": false, "0": false, "F": false} {
		r := xpu.Options{"b": in}.Reader("x")
		assert.Equal(t, want, r.Bool("b", !want), in)
		require.NoError(t, r.Err(), in)
	}
	for _, in := range []string{"", "yes", "maybe", "2"} {
		r := xpu.Options{"b": in}.Reader("x")
		assert.True(t, r.Bool("b", true), in)
		oe := readerErr(t, r, "b", in)
		assert.Equal(t, "true or false", oe.Want)
	}
}

func TestReaderChoice(t *testing.T) {
	for in, want := range map[string]string{"ring": "ring", " Tree ": "tree", "RING": "ring"} {
		r := xpu.Options{"alg": in}.Reader("x")
		assert.Equal(t, want, r.Choice("alg", "auto", "ring", "tree"), "returned as written in choices")
		require.NoError(t, r.Err(), in)
	}
	r := xpu.Options{"alg": "star"}.Reader("x")
	assert.Equal(t, "auto", r.Choice("alg", "auto", "ring", "tree"))
	oe := readerErr(t, r, "alg", "star")
	assert.Equal(t, "one of ring, tree", oe.Want)
	assert.Equal(t, `option alg="star": want one of ring, tree`, r.Err().Error())
}

// The first bad value is the error; the accessors after it return their
// defaults, and neither a later bad value nor an unknown key replaces it.
func TestReaderFirstErrorWins(t *testing.T) {
	r := xpu.Options{"a": "1", "b": "bad", "c": "-5", "d": "3", "zz": "typo"}.Reader("x")
	assert.Equal(t, 1, r.Int("a", 0, 0, 9))
	assert.Equal(t, 0, r.Int("b", 0, 0, 9))
	assert.Equal(t, 0, r.Int("c", 0, 0, 9))
	assert.Equal(t, 2, r.Int("d", 2, 0, 9), "after an error, the default")
	readerErr(t, r, "b", "bad")
	assert.NotErrorIs(t, r.Err(), xpu.ErrUnknownOption)
	assert.Same(t, r.Err(), r.Err(), "Err is stable")
}

func TestReaderUnknown(t *testing.T) {
	r := xpu.Options{"workers": "2", "limt": "64K", "zzz": "1"}.Reader("cpu")
	r.Int("workers", 0, 1, 64)
	r.Bytes("limit", 0, 1, math.MaxInt64)
	r.Bool("hugepages", false)
	r.Int("workers", 0, 1, 64) // a key read twice is listed once
	err := r.Err()
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	require.ErrorIs(t, err, xpu.ErrInvalidArgument)
	var oe *xpu.OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "limt", oe.Key, "the first unknown key in sorted order")
	assert.Equal(t, "64K", oe.Value)
	assert.Equal(t, `unknown option limt="64K": cpu takes hugepages, limit, workers (did you mean limit?)`, err.Error())

	// No near miss: no suggestion.
	r = xpu.Options{"zzz": "1"}.Reader("cpu")
	r.Int("workers", 0, 1, 64)
	assert.Equal(t, `unknown option zzz="1": cpu takes workers`, r.Err().Error())

	// A suggestion is within two edits; of keys as near, the first in
	// sorted order, whatever the order they were read in.
	r = xpu.Options{"wrkrs": "1"}.Reader("cpu")
	r.Int("workers", 0, 1, 64)
	assert.Equal(t, `unknown option wrkrs="1": cpu takes workers (did you mean workers?)`, r.Err().Error())
	r = xpu.Options{"wrkr": "1"}.Reader("cpu")
	r.Int("workers", 0, 1, 64)
	assert.Equal(t, `unknown option wrkr="1": cpu takes workers`, r.Err().Error())
	r = xpu.Options{"limx": "1"}.Reader("cpu")
	r.Int("limb", 0, 0, 1)
	r.Int("lima", 0, 0, 1)
	assert.Equal(t, `unknown option limx="1": cpu takes lima, limb (did you mean lima?)`, r.Err().Error())

	// A backend that reads nothing takes no options.
	r = xpu.Options{"ranks": "4"}.Reader("tcp")
	err = r.Err()
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	assert.Equal(t, `unknown option ranks="4": tcp takes no options`, err.Error())

	// Every message is one line, whatever the value.
	r = xpu.Options{"k": "a\nb"}.Reader("x")
	require.Error(t, r.Err())
	assert.NotContains(t, r.Err().Error(), "\n")
	r = xpu.Options{"k": "a\nb"}.Reader("x")
	r.Int("k", 0, 0, 1)
	assert.Equal(t, `option k="a\nb": want an integer in [0, 1]`, r.Err().Error())
}

func TestReaderScoped(t *testing.T) {
	opts := xpu.Options{"cpu.limit": "1M", "limit": "2M", "tcp.timeout": "1s", "workers": "3"}

	// The cpu reader reads cpu.limit before limit, and skips tcp's keys.
	r := opts.Reader("cpu")
	assert.Equal(t, int64(1<<20), r.Bytes("limit", 0, 1, math.MaxInt64))
	assert.Equal(t, 3, r.Int("workers", 0, 1, 64))
	assert.NoError(t, r.Err(), "tcp.timeout is another backend's; bare limit is read")

	// The tcp reader reads tcp.timeout and the bare keys, and skips cpu's.
	r = opts.Reader("tcp")
	assert.Equal(t, time.Second, r.Duration("timeout", 0, 0, time.Minute))
	assert.Equal(t, int64(2<<20), r.Bytes("limit", 0, 1, math.MaxInt64))
	assert.Equal(t, 3, r.Int("workers", 0, 1, 64))
	assert.NoError(t, r.Err())

	// A bare key no reader of the chain knows is refused; a scoped one is
	// refused by its own backend only.
	r = opts.Reader("tcp")
	r.Duration("timeout", 0, 0, time.Minute)
	r.Bytes("limit", 0, 1, math.MaxInt64)
	err := r.Err()
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	assert.Equal(t, `unknown option workers="3": tcp takes limit, timeout`, err.Error())

	r = xpu.Options{"cpu.limt": "1M"}.Reader("cpu")
	r.Bytes("limit", 0, 1, math.MaxInt64)
	err = r.Err()
	require.ErrorIs(t, err, xpu.ErrUnknownOption)
	assert.Equal(t, `unknown option cpu.limt="1M": cpu takes limit (did you mean limit?)`, err.Error())
	assert.NoError(t, xpu.Options{"cpu.limt": "1M"}.Reader("tcp").Err(), "another backend's typo is its own")

	// A bad scoped value names the key as the driver reads it.
	r = xpu.Options{"cpu.workers": "0", "workers": "2"}.Reader("cpu")
	assert.Equal(t, 1, r.Int("workers", 1, 1, 64))
	readerErr(t, r, "workers", "0")
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1: "1 B", 1000: "1000 B", 1024: "1 KiB", 1536: "1536 B",
		64 << 10: "64 KiB", 3 << 20: "3 MiB", 1 << 30: "1 GiB", 1 << 40: "1 TiB", 1 << 50: "1 PiB", 1 << 60: "1 EiB",
		math.MaxInt64: "9223372036854775807 B", -2048: "-2 KiB"} {
		assert.Equal(t, want, xpu.FormatBytes(n), "%d", n)
	}
}

// A driver reads its options through a Reader: each accessor checks syntax
// and range, and Err reports the first bad value or unknown key.
func ExampleOptionReader() {
	opts := xpu.Options{"workers": "4", "timeout": "250ms", "limit": "64MiB", "cpu.hugepages": "true", "tcp.eager": "1K"}
	r := opts.Reader("cpu")
	workers := r.Int("workers", 1, 1, 64)
	timeout := r.Duration("timeout", time.Second, 0, time.Minute)
	limit := r.Bytes("limit", 0, 1, math.MaxInt64)
	huge := r.Bool("hugepages", false)
	ranks := r.Int("ranks", 2, 1, 64) // absent: the default
	fmt.Println(workers, timeout, limit, huge, ranks, r.Err())

	r = xpu.Options{"workers": "0"}.Reader("cpu")
	r.Int("workers", 1, 1, 64)
	fmt.Println(r.Err())

	r = xpu.Options{"wokers": "4"}.Reader("cpu")
	r.Int("workers", 1, 1, 64)
	r.Bool("hugepages", false)
	err := r.Err()
	fmt.Println(err, errors.Is(err, xpu.ErrUnknownOption), errors.Is(err, xpu.ErrInvalidArgument))
	// Output:
	// 4 250ms 67108864 true 2 <nil>
	// option workers="0": want an integer in [1, 64]
	// unknown option wokers="4": cpu takes hugepages, workers (did you mean workers?) true true
}

// A range without an upper bound is worded as one, not as the largest
// value of the type.
func TestOptionReaderOpenRanges(t *testing.T) {
	for _, c := range []struct {
		read func(r *xpu.OptionReader)
		want string
	}{
		{func(r *xpu.OptionReader) { r.Int("k", 0, 1, math.MaxInt) }, "want an integer of at least 1"},
		{func(r *xpu.OptionReader) { r.Bytes("k", 0, 1, math.MaxInt64) }, `want a size in bytes of at least 1 B, such as "4096" or "64K"`},
		{func(r *xpu.OptionReader) { r.Duration("k", 0, time.Nanosecond, math.MaxInt64) }, "want a duration of at least 1ns"},
	} {
		r := xpu.Options{"k": "0"}.Reader("b")
		c.read(r)
		assert.EqualError(t, r.Err(), `option k="0": `+c.want)
	}
}

// Every accessor refuses a key given with an empty or blank value, naming
// it, and returns the default: leaving the key out asks for the default.
func TestReaderBlankRefusedByEvery(t *testing.T) {
	for name, read := range map[string]func(r *xpu.OptionReader){
		"Int":      func(r *xpu.OptionReader) { assert.Equal(t, 3, r.Int("k", 3, 0, 9)) },
		"Bytes":    func(r *xpu.OptionReader) { assert.Equal(t, int64(3), r.Bytes("k", 3, 0, 9)) },
		"Duration": func(r *xpu.OptionReader) { assert.Equal(t, time.Second, r.Duration("k", time.Second, 0, time.Hour)) },
		"Bool":     func(r *xpu.OptionReader) { assert.True(t, r.Bool("k", true)) },
		"Choice":   func(r *xpu.OptionReader) { assert.Equal(t, "a", r.Choice("k", "a", "a", "b")) },
		"String":   func(r *xpu.OptionReader) { assert.Equal(t, "d", r.String("k", "d")) },
	} {
		t.Run(name, func(t *testing.T) {
			for _, blank := range []string{"", "  "} {
				r := xpu.Options{"k": blank}.Reader("x")
				read(r)
				readerErr(t, r, "k", blank)
			}
		})
	}
}
