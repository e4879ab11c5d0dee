package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu"
)

func TestDeclaredMatchesPrefixes(t *testing.T) {
	s := newSuite(t, "comm", []Option{
		Declare("comm/coll/peer-lost", "r1"),
		Declare("/comm/p2p/cancel/n=2/", "r2"),
	})
	for name, want := range map[string]string{
		"comm/coll/peer-lost":         "r1",
		"comm/coll/peer-lost/n=3":     "r1",
		"comm/coll/peer-lostx":        "",
		"comm/coll":                   "",
		"comm/p2p/cancel/n=2":         "r2",
		"comm/p2p/cancel/n=3":         "",
		"space/coll/peer-lost":        "",
		"comm/coll/peer-lost/n=3/x/y": "r1",
	} {
		got, ok := s.declared(name)
		assert.Equal(t, want != "", ok, name)
		assert.Equal(t, want, got, name)
	}
}

func TestKnownDeclarations(t *testing.T) {
	s := newSuite(t, "comm", nil)
	s.see("comm/p2p", true)            // a group whose body ran
	s.see("comm/p2p/cancel/n=2", true) // a case
	s.see("comm/coll", false)          // a group that did not run (filtered)
	for d, want := range map[string]bool{
		"comm":                    true,  // a prefix of cases
		"comm/p2p":                true,  // a group
		"comm/p2p/cancel":         true,  // a group of cases, by prefix
		"comm/p2p/cancel/n=2":     true,  // a case
		"comm/p2p/cancel/n=9":     false, // under a group that ran, never seen
		"comm/p2p/cancl":          false, // a typo
		"comm/coll/allreduce/n=3": true,  // under a group that did not run: cannot tell
	} {
		assert.Equal(t, want, s.known(d), d)
	}
}

// A declaration belongs to the suite its first element names: of a suite
// that ran, it must name a case; of one that did not, it is not checked.
func TestOwns(t *testing.T) {
	r := newRecord()
	r.ran("space")
	r.see("space/alloc/typed", true)
	assert.Empty(t, r.unknown("space"))
	assert.Empty(t, r.unknown("space/alloc"))
	assert.Contains(t, r.unknown("spaces/alloc"), `"spaces" is neither a suite`)
	assert.Empty(t, r.unknown("pool/space/alloc"), "the pool suite did not run")
	r.ran("pool")
	assert.Contains(t, r.unknown("pool/space/alloc"), "names no case of the pool suite")
}

func TestPatternAndDiff(t *testing.T) {
	a := pattern(1, 1000)
	b := pattern(2, 1000)
	assert.NotEqual(t, a, b, "seeds give different patterns")
	assert.Empty(t, diff(a, a))
	c := append([]byte(nil), a...)
	c[500] ^= 0xff
	c[700] ^= 0x01
	assert.Equal(t, "2 of 1000 bytes differ, the first at offset 500 (got "+
		hex(c[500])+", want "+hex(a[500])+")", diff(a, c))
	assert.Equal(t, "length 999, want 1000", diff(a, a[:999]))
}

func hex(b byte) string {
	const digits = "0123456789abcdef"
	return "0x" + string(digits[b>>4]) + string(digits[b&15])
}

// derivedCaps describes every concept-level capability, once: a name added
// to xpu.Derived must be described here for its failures to read well.
func TestDerivedCapsCoverDerived(t *testing.T) {
	var names []string
	for _, d := range derivedCaps {
		names = append(names, d.name)
		assert.NotEmpty(t, d.iface, d.name)
		assert.Contains(t, []string{kindComm, kindExec, kindEvent, kindSpace}, d.kind, d.name)
	}
	assert.ElementsMatch(t, xpu.Derived, names)
}

// Declarations are compared as go test prints names: spaces as
// underscores, unprintable runes escaped, no slashes at the ends.
func TestNormName(t *testing.T) {
	for in, want := range map[string]string{
		"space/alloc/alignment":     "space/alloc/alignment",
		"/comm/p2p/":                "comm/p2p",
		"TestX/fake space/space/x":  "TestX/fake_space/space/x",
		"TestX/tab\there/a":         "TestX/tab_here/a",
		"TestX/bell\a":              `TestX/bell\a`,
		"TestX/ünïcode stays/space": "TestX/ünïcode_stays/space",
	} {
		assert.Equal(t, want, normName(in), in)
	}
}

// A whole name, as go test -v prints it, declares the case there only.
func TestDeclaredByWholeName(t *testing.T) {
	s := newSuite(t, "space", []Option{
		Declare("TestX/host/space/free", "r1"),
		Declare("TestX/my dev/space/alloc/typed", "r2"),
	})
	for _, tc := range []struct{ rel, whole, want string }{
		{"space/free/double", "TestX/host/space/free/double", "r1"},
		{"space/free/double", "TestX/dev/space/free/double", ""},
		{"space/alloc/typed", "TestX/my_dev/space/alloc/typed", "r2"},
		{"space/alloc/typed", "TestX/host/space/alloc/typed", ""},
	} {
		got, ok := s.declaredAt(tc.rel, tc.whole)
		assert.Equal(t, tc.want != "", ok, tc.whole)
		assert.Equal(t, tc.want, got, tc.whole)
	}
}

// The message of a declaration that names nothing depends on its form;
// a suite-relative name of a suite that did not run is not checked.
func TestUnknownDeclarations(t *testing.T) {
	r := newRecord()
	r.ran("space")
	r.see("space/alloc/alignment", true)
	r.see("TestX/host/space/alloc/alignment", true)
	r.see("TestX/host", true)
	r.see("TestX/dev", false) // filtered out by -run

	assert.Empty(t, r.unknown("space/alloc"))
	assert.Empty(t, r.unknown("TestX/host/space/alloc/alignment"))
	assert.Empty(t, r.unknown("TestX/dev/space/anything"), "below a subtest that did not run")
	assert.Empty(t, r.unknown("comm/p2p/cancel"), "the comm suite did not run")

	assert.Equal(t, `names no case of the space suite (cases are named as `+"`go test -v`"+` prints them below the test, `+
		`or by their whole name); the nearest: "space/alloc/alignment"`, r.unknown("space/alloc/alignmnt"))
	assert.Equal(t, `names no case: no case of this run has that whole name (whole names are as `+"`go test -v`"+
		` prints them, every level included); the nearest: "TestX/host/space/alloc/alignment", "TestX/host", "TestX/dev"`,
		r.unknown("TestX/space/alloc/alignment"))
	assert.Contains(t, r.unknown("bogus/name"), `names no case: "bogus" is neither a suite `+
		`(suite-relative names start with backend, comm, executor, pool, space, stream, transfer) nor a test of this run ("TestX")`)
}

// Run's suites share one record: a declaration is checked once, by Run,
// against every suite's cases.
func TestSharedRecord(t *testing.T) {
	owner := newSuite(t, "backend", []Option{Declare("space/alloc", "r")})
	inner := newSuite(t, "space", []Option{Declare("space/alloc", "r"), sharedRecord(owner.rec)})
	assert.True(t, owner.owner)
	assert.False(t, inner.owner)
	inner.see("space/alloc/typed", true)
	assert.True(t, owner.known("space/alloc"))
	assert.Empty(t, owner.rec.unknown("space/alloc"))
}
