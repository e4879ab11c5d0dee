package sweep

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrSize is returned by ParseSize and Sizes for a size they cannot read
// or a range that holds no size.
var ErrSize = errors.New("bad size")

// MaxSize is the largest size a sweep accepts: 1 GiB.
const MaxSize = 1 << 30

// ParseSize reads a size in bytes: "8", "64KiB", "4MiB", "1GiB" (binary
// units; "K", "KB", "M", "MB" mean the same, as OSU's and nccl-tests'
// flags do). It refuses a negative or fractional size and one above
// MaxSize.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(t)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{
		{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
		{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10},
		{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1},
	} {
		if strings.HasSuffix(lower, u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %q: want a whole number of bytes, such as 8, 64KiB or 4MiB", ErrSize, s)
	}
	if n > MaxSize/mult {
		return 0, fmt.Errorf("%w: %q is above the largest size, %s", ErrSize, s, FormatSize(MaxSize))
	}
	return n * mult, nil
}

// FormatSize writes a size as ParseSize reads it, in the largest binary
// unit that divides it: 8 → "8B", 65536 → "64KiB".
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// Sizes returns the powers of two from lo to hi, both included when they
// are powers of two: lo is rounded up to one and hi down. It refuses a
// range without a power of two in it.
func Sizes(lo, hi int64) ([]int64, error) {
	if lo < 1 {
		lo = 1
	}
	var out []int64
	for s := int64(1); s <= hi && s <= MaxSize; s <<= 1 {
		if s >= lo {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no power of two between %s and %s", ErrSize, FormatSize(lo), FormatSize(hi))
	}
	return out, nil
}

// ParseSizes reads a comma-separated list of sizes ("8,1KiB,4MiB") and
// returns them sorted, without duplicates.
func ParseSizes(list string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(list, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %q lists no size", ErrSize, list)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
