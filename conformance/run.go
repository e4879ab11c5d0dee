package conformance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// Run runs every suite that applies to the backends newBackend makes:
//
//   - for each space (b.Memory and b.Spaces): TestSpace, under a subtest
//     named after the space; and TestPool over b.Memory;
//   - for b.Exec: TestExecutor, and TestStream when it is an
//     executor.Streamer;
//   - for the spaces: TestTransfer over every pair of them and Go memory,
//     on the executor's streams when it has them;
//   - for b.Group: TestComm over groups of 1 to MaxRanks ranks.
//
// A backend with only a job communicator (b.Comm without b.Group) cannot be
// driven from one test process; that is reported as a skip.
//
// When b.Name is a registered driver (xpu.Register) that is available
// here, "backend/capabilities" checks the backends newBackend makes against
// its Info, and "backend/devices" opens the driver's devices by name, as
// RunDriver does; otherwise those cases are skipped, saying why.
//
// newBackend must return a freshly opened backend, closed with t.Cleanup;
// it may call t.Skip when the backend is unavailable. It is called once
// with Run's own t, to learn which suites apply (that backend stays open
// until Run's test ends, and "backend/composition" checks it is coherent),
// then once per case. opts go to every suite; see Declare.
func Run(t *testing.T, newBackend func(t *testing.T) *xpu.Backend, opts ...Option) {
	t.Helper()
	run(t, newBackend, nil, nil, opts)
}

// RunDriver runs Run over the backend registered as name (by xpu.Register),
// opened for each case with xpu.Open(ctx, name, options) and closed when the
// case ends: what `xpu conformance` runs for each backend. It skips, with
// the reason, when the driver's Info says the backend is unavailable here.
//
// Besides Run's cases it checks that the driver's Info tells the truth, in
// the case "backend/capabilities": a freshly opened backend's components —
// its spaces, its executor, an event recorded on one of its streams, its
// job communicator and the ranks of a group of 2 — implement exactly the
// concept-level capabilities (xpu.Derived) Info lists, as
// xpu.CapabilitiesOf derives them; Info lists no capability twice; and it
// lists xpu.CapGroup exactly when Backend.Group is set. When Info lists
// two devices or more and the backend's memory lies on a device,
// "backend/devices" opens each of them (up to four) with DeviceOption and
// checks that it is that device: its spaces on a device say so, and memory
// allocated from it lowers that device's free memory and no other's.
func RunDriver(t *testing.T, name string, options xpu.Options, opts ...Option) {
	t.Helper()
	info, err := xpu.Describe(t.Context(), name)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	if !info.Available {
		t.Skipf("backend %s is unavailable here: %s", name, info.Reason)
	}
	run(t, func(t *testing.T) *xpu.Backend {
		t.Helper()
		b, err := xpu.Open(t.Context(), name, options)
		if err != nil {
			t.Fatalf("conformance: %v", err)
		}
		t.Cleanup(func() {
			// A case may close a component itself (space/close): that is
			// not an error of the backend's Close.
			if err := b.Close(); err != nil && !errors.Is(err, xpu.ErrClosed) {
				t.Errorf("conformance: close %s: %v", name, err)
			}
		})
		return b
	}, &info, &deviceOpener{name: name, options: options}, opts)
}

// run is Run; with info, the driver's description of the backends
// newBackend opens, it also checks their capabilities, and with devs, what
// opens each of the driver's devices, that they are the devices they say.
func run(t *testing.T, newBackend func(t *testing.T) *xpu.Backend, info *xpu.Info, devs *deviceOpener, opts []Option) {
	t.Helper()
	s := newSuite(t, "backend", opts)
	defer s.finish(t)
	// The suites below record their case names for s to check the
	// declarations against, once they have all run.
	opts = append(append([]Option(nil), opts...), sharedRecord(s.rec))
	// The suites that apply depend on the composition, which is learned from
	// a backend opened for the whole run (a case may be filtered out by
	// -run, and its backend is gone when it ends).
	probe := newBackend(t)
	if probe == nil {
		t.Fatal("conformance: the factory returned a nil backend")
	}
	shape := describe(probe)
	s.root().run(t, "composition", func(c *tcase) { checkComposition(c, probe, shape) })
	if !shape.valid() {
		return // the composition case says why
	}
	r := &backendRun{s: s, shape: shape, opts: opts, newBackend: newBackend}
	skip := ""
	if info == nil {
		info, skip = registeredInfo(t, probe.Name)
		if info != nil {
			devs = &deviceOpener{name: probe.Name}
		}
	}
	s.root().run(t, "capabilities", func(c *tcase) {
		if info == nil {
			c.Skip(skip)
		}
		checkCapabilities(c, *info, r.open(c.T))
	})
	s.root().run(t, "devices", func(c *tcase) {
		if info == nil {
			c.Skip(skip)
		}
		checkDevices(c, *info, probe, *devs)
	})
	r.spaces(t)
	if shape.exec {
		r.exec(t)
	}
	if len(shape.spaces) > 0 {
		r.transfer(t)
	}
	r.comm(t)
}

// backendRun is one call of run once the composition is known: it runs
// the suites that apply.
type backendRun struct {
	s          *suite
	shape      composition
	opts       []Option // those of every suite
	newBackend func(t *testing.T) *xpu.Backend
}

// open returns a freshly opened backend for the case t.
func (r *backendRun) open(t *testing.T) *xpu.Backend {
	t.Helper()
	b := r.newBackend(t)
	if b == nil {
		t.Fatal("conformance: the factory returned a nil backend")
	}
	return b
}

// spaces runs TestSpace for each space, under a subtest named after it,
// and TestPool over the first when it is Memory.
func (r *backendRun) spaces(t *testing.T) {
	t.Helper()
	shape := r.shape
	for i, name := range shape.spaces {
		r.s.see(subtestName(t, name), false)
		t.Run(name, func(t *testing.T) {
			r.s.see(t.Name(), true)
			newSpace := func(t *testing.T) memspace.Space {
				sps := spacesOf(r.open(t))
				if len(sps) != len(shape.spaces) {
					t.Fatalf("conformance: the factory's backend has %d spaces, it had %d", len(sps), len(shape.spaces))
				}
				return sps[i]
			}
			TestSpace(t, newSpace, r.opts...)
			if i == 0 && shape.memory {
				TestPool(t, newSpace, r.opts...)
			}
		})
	}
}

// exec runs TestExecutor, and TestStream when the executor is a Streamer.
func (r *backendRun) exec(t *testing.T) {
	t.Helper()
	exec := func(t *testing.T) executor.Executor {
		e := r.open(t).Exec
		if e == nil {
			t.Fatal("conformance: the factory's backend lost its executor")
		}
		return e
	}
	TestExecutor(t, exec, r.opts...)
	if r.shape.streams {
		TestStream(t, func(t *testing.T) executor.Streamer {
			st, ok := executor.As[executor.Streamer](exec(t))
			if !ok {
				t.Fatal("conformance: the factory's executor is no longer a Streamer")
			}
			return st
		}, r.opts...)
	} else {
		t.Run("stream", func(t *testing.T) { t.Skip("the executor is not an executor.Streamer") })
	}
}

// transfer runs TestTransfer over the spaces, on the executor's streams
// when it has them.
func (r *backendRun) transfer(t *testing.T) {
	t.Helper()
	// The spaces and the stream of a transfer case come from one backend.
	var mu sync.Mutex
	perCase := map[*testing.T]*xpu.Backend{}
	openOnce := func(t *testing.T) *xpu.Backend {
		mu.Lock()
		b, ok := perCase[t]
		mu.Unlock()
		if ok {
			return b
		}
		b = r.open(t)
		mu.Lock()
		perCase[t] = b
		mu.Unlock()
		t.Cleanup(func() {
			mu.Lock()
			delete(perCase, t)
			mu.Unlock()
		})
		return b
	}
	topts := r.opts
	if r.shape.streams {
		topts = append(append([]Option(nil), r.opts...), Streams(func(t *testing.T) executor.Streamer {
			st, ok := executor.As[executor.Streamer](openOnce(t).Exec)
			if !ok {
				t.Fatal("conformance: the factory's executor is no longer a Streamer")
			}
			return st
		}))
	}
	TestTransfer(t, func(t *testing.T) []memspace.Space { return spacesOf(openOnce(t)) }, topts...)
}

// comm runs TestComm over groups of the backend's Group, or reports as a
// skip that a job communicator alone cannot be driven from one process.
func (r *backendRun) comm(t *testing.T) {
	t.Helper()
	switch {
	case r.shape.group:
		TestComm(t, func(t *testing.T, n int) []comm.Comm {
			b := r.open(t)
			ranks, err := b.Group(context.Background(), n)
			if errors.Is(err, xpu.ErrNotSupported) || errors.Is(err, xpu.ErrUnavailable) {
				t.Skipf("the backend cannot make a group of %d ranks: %v", n, err)
			}
			require.NoError(t, err, "Group(%d)", n)
			return ranks
		}, r.opts...)
	case r.shape.jobComm:
		t.Run("comm", func(t *testing.T) {
			t.Skip("the backend has a job communicator (Backend.Comm) but no in-process Group: " +
				"run TestComm with a factory that makes the endpoints of a group")
		})
	}
}

// composition is what a backend is made of.
type composition struct {
	spaces         []string // subtest names of the spaces, Memory first
	memory         bool     // spaces[0] is Memory
	exec, streams  bool
	group, jobComm bool
}

// valid reports whether the backend has anything to test.
func (c composition) valid() bool { return len(c.spaces) > 0 || c.exec || c.group || c.jobComm }

// spacesOf lists b's spaces, Memory first.
func spacesOf(b *xpu.Backend) []memspace.Space {
	var out []memspace.Space
	if b.Memory != nil {
		out = append(out, b.Memory)
	}
	for _, sp := range b.Spaces {
		if sp != nil && !(b.Memory != nil && sameSpace(sp, b.Memory)) {
			out = append(out, sp)
		}
	}
	return out
}

func describe(b *xpu.Backend) composition {
	var shape composition
	seen := map[string]int{}
	for _, sp := range spacesOf(b) {
		name := safeName(sp.Name())
		seen[name]++
		if seen[name] > 1 {
			name = name + "#" + strconv.Itoa(seen[name])
		}
		shape.spaces = append(shape.spaces, name)
	}
	shape.memory = b.Memory != nil
	shape.exec = b.Exec != nil
	if b.Exec != nil {
		_, shape.streams = executor.As[executor.Streamer](b.Exec)
	}
	shape.group = b.Group != nil
	shape.jobComm = b.Comm != nil
	return shape
}

func checkComposition(c *tcase, b *xpu.Backend, shape composition) {
	assert.NotEmpty(c, b.Name, "Backend.Name")
	for i, sp := range b.Spaces {
		assert.NotNil(c, sp, "Backend.Spaces[%d]", i)
	}
	if b.Memory != nil && len(b.Spaces) > 0 {
		assert.True(c, sameSpace(b.Spaces[0], b.Memory), "Backend.Spaces lists Memory first")
	}
	assert.True(c, shape.valid(), "the backend has no component: no space, executor or communicator")
	c.Logf("backend %s: spaces %v, executor %v (streams %v), group %v, job communicator %v",
		b.Name, shape.spaces, shape.exec, shape.streams, shape.group, shape.jobComm)
}

// registeredInfo is the Info of the driver registered as name, for Run to
// check a backend of that name against; without one it returns why not.
func registeredInfo(t *testing.T, name string) (*xpu.Info, string) {
	info, err := xpu.Describe(t.Context(), name)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("backend %q is not a registered driver (xpu.Register), so it has no Info to check: %v", name, err)
	case !info.Available:
		return nil, fmt.Sprintf("the driver %q says it is unavailable here (%s): its Info is not checked", name, info.Reason)
	}
	return &info, ""
}
