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

func TestOwns(t *testing.T) {
	s := newSuite(t, "space", nil)
	assert.True(t, s.owns("space"))
	assert.True(t, s.owns("space/alloc"))
	assert.False(t, s.owns("spaces/alloc"))
	assert.False(t, s.owns("pool/space/alloc"))
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
