package xpu

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xpu-go/xpu/internal/nearest"
)

// OptionError reports an option whose value a driver cannot use: it names
// the key, the value as given and what the driver wants instead. It matches
// ErrInvalidArgument.
type OptionError struct {
	Key   string // the option's key
	Value string // its value, as given
	Want  string // what would be accepted, e.g. "an integer in [1, 64]"
	// Err is the sentinel the error matches: ErrInvalidArgument when nil,
	// ErrUnknownOption for a key the driver does not know.
	Err error
}

func (e *OptionError) Error() string {
	if e.Err == ErrUnknownOption {
		return fmt.Sprintf("unknown option %s=%q: %s", e.Key, e.Value, e.Want)
	}
	return fmt.Sprintf("option %s=%q: want %s", e.Key, e.Value, e.Want)
}

// Unwrap returns Err, or ErrInvalidArgument when Err is nil.
func (e *OptionError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return ErrInvalidArgument
}

// parseBytes reads a size in bytes: a non-negative decimal integer with an
// optional unit K, M, G, T or P, in powers of 1024, in any case, written K,
// KB or KiB, with or without a space before it ("4096", "64K", "2 MiB",
// "1gb"); a size over math.MaxInt64 bytes does not parse.
func parseBytes(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	digits := len(s) - len(strings.TrimLeft(s, "0123456789"))
	if digits == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:digits], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := strings.ToUpper(strings.TrimSpace(s[digits:]))
	shift := 0
	if unit != "" && unit != "B" {
		shift = 10 * (1 + strings.IndexByte("KMGTP", unit[0]))
		if shift == 0 {
			return 0, false
		}
		switch unit[1:] {
		case "", "B", "IB":
		default:
			return 0, false
		}
	}
	if n > math.MaxInt64>>shift {
		return 0, false
	}
	return n << shift, true
}

// OptionReader reads the options of one driver's Open, checks each value's
// type and range as it is read, and refuses the keys that were not read:
//
//	r := opts.Reader("cpu")
//	workers := r.Int(OptWorkers, 0, 1, MaxWorkers)
//	limit := r.Bytes(OptLimit, 0, 1, math.MaxInt64)
//	huge := r.Bool(OptHugePages, false)
//	if err := r.Err(); err != nil {
//		return nil, xerr.Op("cpu", "open", err)
//	}
//
// Every accessor returns its default when the key is absent, and also after
// an error; Err returns the first error, or, when every value was good, an
// error for the first key no accessor read, which names it and the keys the
// driver knows. A key may be scoped to one backend as "name.key"
// ("cpu.limit"): the reader of that backend reads it as key (and it takes
// precedence over a bare key), and every other reader skips it, so one set
// of options can serve a fallback chain of backends ("XPU_BACKEND=cuda,cpu").
// Bare keys are read by whichever backend is opened.
//
// An OptionReader is for one goroutine; it is cheap (no allocation unless
// an option is set).
type OptionReader struct {
	opts    Options
	backend string
	aliases []string // the backend's other names, read only when opts has keys
	known   []string
	err     error
}

// Reader returns an OptionReader of o for the driver registered as backend.
// Keys scoped to an alias of backend (RegisterAlias) are its own too, after
// those scoped to backend.
func (o Options) Reader(backend string) *OptionReader {
	r := &OptionReader{opts: o, backend: backend}
	if len(o) != 0 {
		r.aliases = aliasesOf(backend)
	}
	return r
}

// ownScope reports whether options scoped to scope are this reader's.
func (r *OptionReader) ownScope(scope string) bool {
	return scope == r.backend || slices.Contains(r.aliases, scope)
}

// lookup marks key known and returns its value, scoped keys first.
func (r *OptionReader) lookup(key string) (string, bool) {
	r.known = append(r.known, key)
	if r.err != nil || len(r.opts) == 0 {
		return "", false
	}
	if v, ok := r.opts[r.backend+"."+key]; ok {
		return v, true
	}
	for _, a := range r.aliases {
		if v, ok := r.opts[a+"."+key]; ok {
			return v, true
		}
	}
	v, ok := r.opts[key]
	return v, ok
}

// fail records the first error; it returns def for the accessor to return.
func fail[T any](r *OptionReader, key, value, want string, def T) T {
	if r.err == nil {
		r.err = &OptionError{Key: key, Value: value, Want: want}
	}
	return def
}

// inRange reads key with parse and checks that its value is in [lo, hi];
// a value that does not parse, or lies outside, is an error that wants
// want(), which describes the values accepted.
func inRange[T cmp.Ordered](r *OptionReader, key string, def, lo, hi T, parse func(string) (T, bool), want func() string) T {
	v, ok := r.lookup(key)
	if !ok {
		return def
	}
	n, good := parse(v)
	if !good || n < lo || n > hi {
		return fail(r, key, v, want(), def)
	}
	return n
}

// Int reads key as a decimal integer in [lo, hi].
func (r *OptionReader) Int(key string, def, lo, hi int) int {
	return inRange(r, key, def, lo, hi, parseInt, func() string {
		if hi == math.MaxInt {
			return fmt.Sprintf("an integer of at least %d", lo)
		}
		return fmt.Sprintf("an integer in [%d, %d]", lo, hi)
	})
}

// Bytes reads key as a size in bytes in [lo, hi]: a decimal integer with an
// optional unit K, M, G, T or P in powers of 1024, in any case, written K,
// KB or KiB, with or without a space ("4096", "64K", "2 MiB", "1gb").
func (r *OptionReader) Bytes(key string, def, lo, hi int64) int64 {
	return inRange(r, key, def, lo, hi, parseBytes, func() string {
		span := fmt.Sprintf("from %s to %s", FormatBytes(lo), FormatBytes(hi))
		if hi == math.MaxInt64 {
			span = "of at least " + FormatBytes(lo)
		}
		return fmt.Sprintf(`a size in bytes %s, such as "4096" or "64K"`, span)
	})
}

// Duration reads key as a Go duration ("250ms", "3s") in [lo, hi]; a bare
// "0" is zero.
func (r *OptionReader) Duration(key string, def, lo, hi time.Duration) time.Duration {
	return inRange(r, key, def, lo, hi, parseDuration, func() string {
		if hi == math.MaxInt64 {
			return fmt.Sprintf("a duration of at least %v", lo)
		}
		return fmt.Sprintf("a duration from %v to %v", lo, hi)
	})
}

// parseInt reads a decimal integer, with spaces around it.
func parseInt(s string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	return n, err == nil
}

// parseDuration reads a Go duration, with spaces around it.
func parseDuration(s string) (time.Duration, bool) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	return d, err == nil
}

// Bool reads key as a boolean: "true", "false", "1", "0", "t", "f" and
// their capitalised forms, as strconv.ParseBool reads them.
func (r *OptionReader) Bool(key string, def bool) bool {
	v, ok := r.lookup(key)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return fail(r, key, v, "true or false", def)
	}
	return b
}

// String reads key as text, with surrounding spaces removed. An empty (or
// blank) value is an error, as it is for every accessor: a key given with
// no value is a mistake to report, not a request for the default, which
// leaving the key out asks for.
func (r *OptionReader) String(key, def string) string {
	v, ok := r.lookup(key)
	if !ok {
		return def
	}
	if strings.TrimSpace(v) == "" {
		return fail(r, key, v, "a value (leave the key out for the default)", def)
	}
	return strings.TrimSpace(v)
}

// Choice reads key as one of choices, compared without regard to case or
// surrounding spaces, and returns it as written in choices.
func (r *OptionReader) Choice(key, def string, choices ...string) string {
	v, ok := r.lookup(key)
	if !ok {
		return def
	}
	for _, c := range choices {
		if strings.EqualFold(strings.TrimSpace(v), c) {
			return c
		}
	}
	return fail(r, key, v, "one of "+strings.Join(choices, ", "), def)
}

// Err returns the first bad value read, else an *OptionError matching
// ErrUnknownOption for the first key (in sorted order) that is neither read
// by an accessor nor scoped to another backend, else nil.
func (r *OptionReader) Err() error {
	if r.err != nil {
		return r.err
	}
	var unknown []string
	for k := range r.opts {
		name := k
		if scope, rest, ok := strings.Cut(k, "."); ok {
			if !r.ownScope(scope) {
				continue
			}
			name = rest
		}
		if !slices.Contains(r.known, name) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	k := unknown[0]
	known := slices.Clone(r.known)
	slices.Sort(known)
	known = slices.Compact(known)
	want := r.backend + " takes no options"
	if len(known) > 0 {
		want = r.backend + " takes " + strings.Join(known, ", ")
		// One suggestion, within two edits; of several as near, the first
		// in sorted order.
		bare := k
		if scope, rest, ok := strings.Cut(k, "."); ok && r.ownScope(scope) {
			bare = rest
		}
		if near := nearest.Names(bare, known, 1, 2); len(near) > 0 {
			want = fmt.Sprintf("%s (did you mean %s?)", want, near[0])
		}
	}
	return &OptionError{Key: k, Value: r.opts[k], Want: want, Err: ErrUnknownOption}
}

// FormatBytes writes n bytes as the largest unit of 1024 that divides it
// exactly ("64 KiB", "1 GiB", "1000 B"), the form option errors use.
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u := 0
	for n != 0 && n%1024 == 0 && u < len(units)-1 {
		n /= 1024
		u++
	}
	return strconv.FormatInt(n, 10) + " " + units[u]
}
