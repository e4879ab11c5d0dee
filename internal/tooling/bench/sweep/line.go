package sweep

import (
	"fmt"
	"strconv"
	"strings"
)

// The line format: how a rank 0 in another process (a sweep under `xpu
// run`, the Open MPI reference under mpirun) reports its points, one line
// each, as soon as it has measured them, so that a sweep stopped midway
// keeps every point finished before:
//
//	point <op> <size> <ranks> <iters> <ok|invalid> <ns> <ns> …
//	end <complete|budget>
//
// <ns> are the samples (Point.Samples). Lines that begin with neither word
// are not the format's and are skipped by ParseLines.

// FormatLine writes p as a "point" line (without the newline); an invalid
// point loses its reason, which the line has no room for.
func FormatLine(p Point) string {
	var b strings.Builder
	valid := "ok"
	if p.Invalid != "" {
		valid = "invalid"
	}
	fmt.Fprintf(&b, "point %s %d %d %d %s", p.Op, p.Size, p.Ranks, p.Iters, valid)
	for _, v := range p.Samples {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatFloat(v, 'g', 7, 64))
	}
	return b.String()
}

// ParseLine reads a "point" line into a point of series. ok is false for
// a line that is not a point line; err is set for one that is but does
// not parse.
func ParseLine(line, series string) (p Point, ok bool, err error) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "point" {
		return Point{}, false, nil
	}
	bad := func(what string) (Point, bool, error) {
		return Point{}, true, fmt.Errorf("%w: point line %q: %s", ErrFormat, line, what)
	}
	if len(f) < 7 {
		return bad("too short")
	}
	p = Point{Series: series, Op: f[1]}
	if _, known := LookupOp(p.Op); !known {
		return bad("unknown operation")
	}
	if p.Size, err = strconv.ParseInt(f[2], 10, 64); err != nil || p.Size < 0 {
		return bad("size")
	}
	if p.Ranks, err = strconv.Atoi(f[3]); err != nil || p.Ranks < 1 {
		return bad("ranks")
	}
	if p.Iters, err = strconv.Atoi(f[4]); err != nil || p.Iters < 1 {
		return bad("iterations")
	}
	switch f[5] {
	case "ok":
	case "invalid":
		p.Invalid = "the reference's check of the results failed"
	default:
		return bad("validity")
	}
	for _, s := range f[6:] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0) {
			return bad("sample " + s)
		}
		p.Samples = append(p.Samples, v)
	}
	p.Fill()
	return p, true, nil
}

// ParseLines reads the point lines of out (the other lines are skipped)
// as points of series, and whether an "end" line says the run was
// complete (complete) or stopped by its budget.
func ParseLines(out, series string) (points []Point, end string, err error) {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "end" {
			end = f[1]
			continue
		}
		p, ok, err := ParseLine(line, series)
		if err != nil {
			return points, end, err
		}
		if ok {
			points = append(points, p)
		}
	}
	return points, end, nil
}
