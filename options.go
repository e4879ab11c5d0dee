package xpu

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// OptionError reports an option whose value a driver cannot use: it names
// the key, the value as given and what the driver wants instead. It matches
// ErrInvalidArgument.
type OptionError struct {
	Key   string // the option's key
	Value string // its value, as given
	Want  string // what would be accepted, e.g. "an integer in [1, 64]"
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("option %s=%q: want %s", e.Key, e.Value, e.Want)
}

// Unwrap returns ErrInvalidArgument.
func (e *OptionError) Unwrap() error { return ErrInvalidArgument }

// Invalid returns an *OptionError for key, with its value in o and want,
// what the driver accepts. Drivers use it for values that parse but are out
// of range, so that every bad option reads the same.
func (o Options) Invalid(key, want string) error {
	return &OptionError{Key: key, Value: o[key], Want: want}
}

// Int returns key's value as a decimal integer ("8", "-1"), or def when o
// has no such key.
//
// Int, Duration, Bool and Bytes ignore spaces around a value, and report
// one that does not parse as an *OptionError, which names the key and the
// value and matches ErrInvalidArgument. None of them checks a range: a
// driver that wants, say, a positive count checks the result and reports
// with Invalid. The default is returned as given, unchecked.
func (o Options) Int(key string, def int) (int, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return def, o.Invalid(key, fmt.Sprintf("an integer in [%d, %d]", math.MinInt, math.MaxInt))
		}
		return def, o.Invalid(key, "an integer")
	}
	return n, nil
}

// Duration returns key's value as a Go duration ("250ms", "3s", "1h30m"),
// or def when o has no such key. A bare "0" is zero; any other number needs
// a unit.
func (o Options) Duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return def, o.Invalid(key, `a duration such as "500ms" or "3s"`)
	}
	return d, nil
}

// Bool returns key's value as a boolean ("true", "false", "1", "0", "t",
// "f" and their capitalised forms, as strconv.ParseBool reads them), or def
// when o has no such key.
func (o Options) Bool(key string, def bool) (bool, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return def, o.Invalid(key, "true or false")
	}
	return b, nil
}

// Bytes returns key's value as a size in bytes: a non-negative decimal
// integer with an optional unit K, M, G, T or P, in powers of 1024, in any
// case, written K, KB or KiB, with or without a space before it ("4096",
// "64K", "2 MiB", "1gb"), or def when o has no such key. A size over
// math.MaxInt64 bytes is an error.
func (o Options) Bytes(key string, def int64) (int64, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	n, ok := parseBytes(v)
	if !ok {
		return def, o.Invalid(key, `a size in bytes such as "4096", "64K" or "2GiB" (up to 8 EiB)`)
	}
	return n, nil
}

// parseBytes reads a size as Options.Bytes describes it.
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
