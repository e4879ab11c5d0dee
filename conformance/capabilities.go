package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/executor"
)

// The kinds of component a concept-level capability belongs to.
const (
	kindComm  = "communicator"
	kindExec  = "executor"
	kindEvent = "event"
	kindSpace = "memory space"
)

// derivedCap is a concept-level capability (xpu.Derived): the interface it
// stands for and the kind of component that implements it.
type derivedCap struct {
	name, iface, kind string
}

// derivedCaps describes every name of xpu.Derived, in the order failures
// are reported.
var derivedCaps = []derivedCap{
	{xpu.CapP2P, "comm.Comm", kindComm},
	{xpu.CapBlocking, "comm.Blocking", kindComm},
	{xpu.CapCollectivesNative, "comm.Collectives", kindComm},
	{xpu.CapOneSided, "comm.OneSided", kindComm},
	{xpu.CapNotify, "comm.Notifier", kindComm},
	{xpu.CapParallel, "executor.Parallel", kindExec},
	{xpu.CapStreams, "executor.Streamer", kindExec},
	{xpu.CapEventsTiming, "executor.TimedEvent", kindEvent},
	{xpu.CapMemoryStats, "memspace.StatsSpace", kindSpace},
	{xpu.CapMemoryLookup, "memspace.Lookuper", kindSpace},
	{xpu.CapMemoryAvailable, "memspace.Availability", kindSpace},
}

// component is one part of an opened backend that capabilities are
// derived from.
type component struct {
	kind string
	v    any
}

// goTypeName names a component's type as Go code does, without the pointer:
// "tcp.Comm".
func goTypeName(v any) string { return strings.TrimPrefix(fmt.Sprintf("%T", v), "*") }

// componentsOf returns what the concept-level capabilities of b are derived
// from: its spaces, its executor and an event recorded on one of its
// streams when it is an executor.Streamer, its job communicator and the
// ranks of a group when it makes groups. What it opens is closed when the
// case ends.
func componentsOf(c *tcase, b *xpu.Backend) []component {
	c.Helper()
	var out []component
	add := func(kind string, v any) {
		if v != nil {
			out = append(out, component{kind, v})
		}
	}
	if b.Memory != nil {
		add(kindSpace, b.Memory)
	}
	for _, sp := range b.Spaces {
		if sp != nil {
			add(kindSpace, sp)
		}
	}
	if b.Exec != nil {
		add(kindExec, b.Exec)
		if sr, ok := b.Exec.(executor.Streamer); ok {
			st, err := sr.NewStream()
			if err != nil {
				c.Fatalf("conformance: NewStream of the executor %s: %v", goTypeName(b.Exec), err)
			}
			c.Cleanup(func() { _ = st.Close() })
			ev, err := st.Record()
			if err != nil {
				c.Fatalf("conformance: Record on a stream of the executor %s: %v", goTypeName(b.Exec), err)
			}
			add(kindEvent, ev)
		}
	}
	if b.Comm != nil {
		add(kindComm, b.Comm)
	}
	if b.Group != nil {
		ranks, err := b.Group(c.ctx, 2)
		if errors.Is(err, xpu.ErrNotSupported) || errors.Is(err, xpu.ErrUnavailable) {
			ranks, err = b.Group(c.ctx, 1)
		}
		if err != nil {
			c.Fatalf("conformance: Backend.Group(2): %v", err)
		}
		c.Cleanup(func() { closeAll(c, ranks) })
		for _, r := range ranks {
			add(kindComm, r)
		}
	}
	return out
}

// checkCapabilities checks that info, the driver's description of b, lists
// each concept-level capability exactly when one of b's components
// implements its interface, lists no capability twice, and lists "group"
// exactly when b makes groups. Each failure is one line.
func checkCapabilities(c *tcase, info xpu.Info, b *xpu.Backend) {
	c.Helper()
	count := map[string]int{}
	for _, name := range info.Capabilities {
		count[name]++
	}
	for _, name := range info.Capabilities {
		if n := count[name]; n > 1 {
			c.Errorf("Info lists %s %d times", name, n)
			count[name] = 1
		}
	}

	comps := componentsOf(c, b)
	all := make([]any, len(comps))
	for i, cp := range comps {
		all[i] = cp.v
	}
	derived := xpu.CapabilitiesOf(all...)
	for _, d := range derivedCaps {
		listed, has := count[d.name] > 0, slices.Contains(derived, d.name)
		switch {
		case listed && !has:
			c.Errorf("Info lists %s but %s", d.name, lacking(comps, d))
		case has && !listed:
			names, verb := implementers(comps, d.name), "implements"
			if len(names) > 1 {
				verb = "implement"
			}
			c.Errorf("%s %s %s but Info does not list %s", joinAnd(names), verb, d.iface, d.name)
		}
	}

	switch listed := count[xpu.CapGroup] > 0; {
	case listed && b.Group == nil:
		c.Errorf("Info lists %s but Backend.Group is nil", xpu.CapGroup)
	case !listed && b.Group != nil:
		c.Errorf("Backend.Group is set but Info does not list %s", xpu.CapGroup)
	}
}

// lacking says which components do not implement d's interface: "tcp.Comm
// does not implement comm.Blocking", or that the backend has no component of
// d's kind.
func lacking(comps []component, d derivedCap) string {
	var names []string
	for _, cp := range comps {
		if cp.kind == d.kind && !slices.Contains(names, goTypeName(cp.v)) {
			names = append(names, goTypeName(cp.v))
		}
	}
	switch len(names) {
	case 0:
		if d.kind == kindEvent {
			return "the backend has no event: its executor is not an executor.Streamer"
		}
		return "the backend has no " + d.kind
	case 1:
		return names[0] + " does not implement " + d.iface
	}
	return "none of " + strings.Join(names, ", ") + " implements " + d.iface
}

// implementers returns the names of the types of the components that give
// capability name.
func implementers(comps []component, name string) []string {
	var names []string
	for _, cp := range comps {
		if slices.Contains(xpu.CapabilitiesOf(cp.v), name) && !slices.Contains(names, goTypeName(cp.v)) {
			names = append(names, goTypeName(cp.v))
		}
	}
	return names
}

// joinAnd joins names as a sentence does: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
