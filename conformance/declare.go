package conformance

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/xpu-go/xpu/internal/nearest"
)

// areas are the first elements of the suite-relative case names: one per
// suite.
var areas = []string{"backend", "comm", "executor", "pool", "space", "stream", "transfer"}

// record keeps what the suites of one call (Run, or a suite alone) learned
// about case names: each name as the suite knows it ("space/free/double")
// and as `go test -v` prints it ("TestX/host/space/free/double"), with
// whether it is a case or a group whose body ran (true) or a group that did
// not run (false: filtered out by -run, or declared), below which nothing
// is known.
type record struct {
	mu    sync.Mutex
	areas map[string]bool // the areas whose suites ran
	seen  map[string]bool
}

func newRecord() *record {
	return &record{areas: map[string]bool{}, seen: map[string]bool{}}
}

func (r *record) ran(area string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.areas[area] = true
}

func (r *record) see(name string, ran bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ran || !r.seen[name] {
		r.seen[name] = ran
	}
}

func (r *record) known(d string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.knownLocked(d)
}

func (r *record) knownLocked(d string) bool {
	if _, ok := r.seen[d]; ok {
		return true
	}
	for name, ran := range r.seen {
		if strings.HasPrefix(name, d+"/") {
			return true // d is a group of cases
		}
		if !ran && strings.HasPrefix(d, name+"/") {
			return true // below a group whose cases were not listed
		}
	}
	return false
}

// unknown returns why the declared name d names nothing, or "" when it
// names a case or a group, or cannot be checked (a suite-relative name of a
// suite that did not run).
func (r *record) unknown(d string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.knownLocked(d) {
		return ""
	}
	first, _, _ := strings.Cut(d, "/")
	switch {
	case slices.Contains(areas, first):
		if !r.areas[first] {
			return ""
		}
		return fmt.Sprintf("names no case of the %s suite (cases are named as `go test -v` prints them below the test, "+
			"or by their whole name)%s", first, r.nearest(d, relName))
	case r.tests()[first]:
		return fmt.Sprintf("names no case: no case of this run has that whole name "+
			"(whole names are as `go test -v` prints them, every level included)%s", r.nearest(d, wholeName))
	}
	var tests []string
	for name := range r.tests() {
		tests = append(tests, strconv.Quote(name))
	}
	sort.Strings(tests)
	return fmt.Sprintf("names no case: %q is neither a suite (suite-relative names start with %s) nor a test of this run (%s)%s",
		first, strings.Join(areas, ", "), strings.Join(tests, ", "), r.nearest(d, anyName))
}

// tests returns the top-level tests of the whole names recorded.
func (r *record) tests() map[string]bool {
	out := map[string]bool{}
	for name := range r.seen {
		first, _, _ := strings.Cut(name, "/")
		if !slices.Contains(areas, first) {
			out[first] = true
		}
	}
	return out
}

// The forms of name nearest compares with.
const (
	relName = iota
	wholeName
	anyName
)

// nearest names the three recorded names closest to d, of the given form,
// for the message of a declaration that names nothing.
func (r *record) nearest(d string, form int) string {
	var names []string
	for name := range r.seen {
		rel := slices.Contains(areas, strings.SplitN(name, "/", 2)[0])
		if (form == relName && !rel) || (form == wholeName && rel) {
			continue
		}
		names = append(names, name)
	}
	near := nearest.Names(d, names, 3, -1)
	if len(near) == 0 {
		return ""
	}
	q := make([]string, len(near))
	for i, name := range near {
		q[i] = strconv.Quote(name)
	}
	return "; the nearest: " + strings.Join(q, ", ")
}

// normName is a declared or case name as `go test -v` prints it: without
// leading or trailing slashes, spaces as underscores and unprintable runes
// escaped (as package testing rewrites subtest names).
func normName(s string) string {
	s = strings.Trim(s, "/")
	var b strings.Builder
	for _, r := range s {
		switch {
		case isSpace(r):
			b.WriteByte('_')
		case !strconv.IsPrint(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isSpace is package testing's test of a space in a subtest name.
func isSpace(r rune) bool {
	if r < 0x2000 {
		switch r {
		case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680:
			return true
		}
		return false
	}
	if r <= 0x200a {
		return true
	}
	switch r {
	case 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return false
}

// subtestName is the whole name of t's subtest name, as go test prints it
// (when no other subtest of t has the same name).
func subtestName(t *testing.T, name string) string {
	return t.Name() + "/" + normName(name)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
