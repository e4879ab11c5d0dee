package conformance_test

import (
	"testing"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cpu"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// TestSuiteCatchesBrokenImplementations runs each TestBroken… test in a
// child process and checks that the suite fails it, naming the case that
// catches the defect.
func TestSuiteCatchesBrokenImplementations(t *testing.T) {
	runChildren(t, []childCase{
		{test: "TestBrokenAlignment", want: []string{
			"--- FAIL: TestBrokenAlignment/space/alloc/alignment",
			"--- FAIL: TestBrokenAlignment/space/alloc/typed",
			"is not aligned to",
		}},
		// A bump allocator that ignores the alignment asked for: its first
		// block is at an aligned base, the ones beside it are not.
		{test: "TestBrokenBumpAlignment/^space$/^alloc$/^alignment$", want: []string{
			"--- FAIL: TestBrokenBumpAlignment/space/alloc/alignment",
			"other blocks live",
			"is not aligned to",
		}},
		// A Free that keeps the ledger right but never the memory.
		{test: "TestBrokenNeverReuse/^space$/^free$/^reuse$", want: []string{
			"--- FAIL: TestBrokenNeverReuse/space/free/reuse",
			"round 2: space fake ran out after 0 blocks",
			"a Free that keeps the ledger right but keeps the memory",
		}},
		// impl's errors returned without the space's name.
		{test: "TestBrokenBareErrors/^space$/^alloc$", want: []string{
			"--- FAIL: TestBrokenBareErrors/space/alloc/invalid-size",
			"--- FAIL: TestBrokenBareErrors/space/alloc/invalid-alignment",
			`Allocate(0, 0): the error "size 0 is not positive: invalid argument" does not name space fake`,
		}},
		{test: "TestBrokenDoubleFree", want: []string{
			"--- FAIL: TestBrokenDoubleFree/space/free/double",
			"Free #2 of a freed block",
		}},
		{test: "TestBrokenSubSliceFree", want: []string{
			"--- FAIL: TestBrokenSubSliceFree/space/free/sub-slice",
			"a prefix (same address, shorter)",
		}},
		{test: "TestBrokenLedger", want: []string{
			"--- FAIL: TestBrokenLedger/space/stats",
			"ledger of space fake at the end of the case",
		}},
		{test: "TestBrokenDropIndex", want: []string{
			"--- FAIL: TestBrokenDropIndex/executor/parallel/for/coverage",
			"--- FAIL: TestBrokenDropIndex/executor/parallel/range/chunks",
			"--- FAIL: TestBrokenDropIndex/executor/parallel/reduce",
			"indices never ran",
		}},
		{test: "TestBrokenStickyError", want: []string{
			"--- FAIL: TestBrokenStickyError/stream/error/sticky",
			"Synchronize reports the sticky error",
		}},
		{test: "TestBrokenReorder/^comm$/^p2p$", want: []string{
			"--- FAIL: TestBrokenReorder/comm/p2p/non-overtaking/n=2",
			"were reordered or lost",
		}},
		{test: "TestBrokenTransfer", want: []string{
			"--- FAIL: TestBrokenTransfer/transfer/copy/sync",
			"--- FAIL: TestBrokenTransfer/transfer/copy/async",
			"bytes differ",
		}},
		{test: "TestBrokenHang", want: []string{
			"conformance: case TestBrokenHang/executor/execute/canceled hung",
			"deafExec",
		}},
		{test: "TestBrokenHangComm/^comm$/^p2p$/^send-recv$", want: []string{
			"--- FAIL: TestBrokenHangComm/comm/p2p/send-recv/n=2",
			"conformance: case TestBrokenHangComm/comm/p2p/send-recv/n=2 hung: still running",
			"conformance_test.hangRequest.Wait", // the case's goroutines
			"conformance: case TestBrokenHangComm/comm/p2p/send-recv/n=2 left goroutines running after its cleanups",
			// The suite went on.
			"--- PASS: TestBrokenHangComm/comm/p2p/send-recv/n=3",
		}, fast: "TestBrokenHangComm/comm/p2p/send-recv/n=2", bound: conformance.DefaultTimeout + conformance.DefaultGrace + 5*time.Second},
		{test: "TestBrokenHangClose", want: []string{
			"conformance: case TestBrokenHangClose/space/properties hung: still running",
			"after its body returned, in its cleanups",
			"conformance_test.stuckSpace.Close",
		}, absent: []string{"--- PASS: TestBrokenHangClose/space/alloc"}},
		{test: "TestBrokenPanic", want: []string{
			"--- FAIL: TestBrokenPanic/executor/name",
			"conformance: case TestBrokenPanic/executor/name panicked: panicExec has no name",
			"conformance_test.panicExec.Name",
			"--- PASS: TestBrokenPanic/executor/execute/runs",
		}},
		{test: "TestBrokenDeclaration", want: []string{
			`Declare("executor/no-such-case") names no case of the executor suite`,
			`Declare("executor/name") has no reason`,
		}},
		{test: "TestBrokenDeclarationOutsideSuites", want: []string{
			`Declare("bogus/name") names no case: "bogus" is neither a suite`,
			// The other suites' names are not checked by TestSpace alone.
			"--- FAIL: TestBrokenDeclarationOutsideSuites (",
		}, absent: []string{`Declare("comm/p2p/cancel")`}},
		{test: "TestBrokenDeclarationWholeName/^fake$/^space$/^alloc$", want: []string{
			`Declare("TestBrokenDeclarationWholeName/space/alloc/alignment") names no case: no case of this run has that whole name`,
			`the nearest: "TestBrokenDeclarationWholeName/fake/space/alloc/alignment"`,
			`Declare("space/alloc/alignmnt") names no case of the space suite`,
			`the nearest: "space/alloc/alignment"`,
		}},
		{test: "TestDeclaredWholeName/^fake_space$/^space$/^alloc$", ok: true, want: []string{
			"--- SKIP: TestDeclaredWholeName/fake_space/space/alloc/alignment",
			"declared by the implementation: as printed",
			"--- SKIP: TestDeclaredWholeName/fake_space/space/alloc/typed",
			"declared by the implementation: with the space's own name",
			"--- PASS: TestDeclaredWholeName/fake_space/space/alloc/sizes",
		}},
		{test: "TestBrokenCapabilitiesListed/^backend$/^capabilities$", want: []string{
			"--- FAIL: TestBrokenCapabilitiesListed/backend/capabilities",
			"Info lists memory.stats 2 times",
			"Info lists memory.lookup but conformance_test.fakeSpace does not implement memspace.Lookuper",
			"Info lists streams but the backend has no executor",
			"Info lists group but Backend.Group is nil",
		}},
		{test: "TestBrokenCapabilitiesUnlisted/^backend$/^capabilities$", want: []string{
			"--- FAIL: TestBrokenCapabilitiesUnlisted/backend/capabilities",
			"conformance_test.fakeSpace implements memspace.StatsSpace but Info does not list memory.stats",
			"local.Comm implements comm.Comm but Info does not list p2p",
			"Backend.Group is set but Info does not list group",
		}},
		{test: "TestHonestDriver/^backend$/^capabilities$", ok: true, want: []string{
			"--- PASS: TestHonestDriver/backend/capabilities",
		}, absent: []string{"Info lists", "Info does not list"}},
		{test: "TestBrokenDevicesConfused/^backend$/^devices$", want: []string{
			"--- FAIL: TestBrokenDevicesConfused/backend/devices",
			"16777216 bytes allocated from the backend opened for device 0: device 1's free memory fell by 16777216",
			"the memory was taken from the wrong device",
		}},
		{test: "TestBrokenDevicesMislabelled/^backend$/^devices$", want: []string{
			"--- FAIL: TestBrokenDevicesMislabelled/backend/devices",
			"the backend opened with device=1 has space fake-device on device 0 (Properties().Device)",
		}},
		{test: "TestBrokenUnknownDriver", want: []string{
			`conformance: xpu describe: unknown backend "conformance-test-no-such-driver"; known: `,
		}},
		{test: "TestRunChecksInfo/^backend$", want: []string{
			"--- PASS: TestRunChecksInfo/backend/composition",
			"--- FAIL: TestRunChecksInfo/backend/capabilities",
			"Info lists memory.stats 2 times",
		}},
		{test: "TestDeclared", ok: true, want: []string{
			"--- SKIP: TestDeclared/executor/parallel/nested",
			"declared by the implementation: nested loops are not supported here",
			"--- SKIP: TestDeclared/executor/execute/panic",
			"--- PASS: TestDeclared/executor/execute/runs",
		}},
	})
}

// fakeSpaces returns a factory of fakeSpaces with defect d.
func fakeSpaces(d defect) func(*testing.T) *fakeSpace {
	return func(*testing.T) *fakeSpace { return newFakeSpace(d) }
}

func TestBrokenAlignment(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, fakeSpaces(ignoreAlignment))
}

func TestBrokenBareErrors(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, fakeSpaces(bareErrors))
}

func TestBrokenBumpAlignment(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(*testing.T) *bumpSpace { return newBumpSpace() })
}

func TestBrokenNeverReuse(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(*testing.T) *fakeSpace {
		s := newFakeSpace(neverReuse)
		s.acct.capacity = 4 << 20
		return s
	})
}

// TestSpaceWithCapacity runs the space suite over the correct fake with a
// capacity of 4 MiB, which it reports: the reuse case fills it three times.
func TestSpaceWithCapacity(t *testing.T) {
	conformance.TestSpace(t, func(*testing.T) *fakeSpace {
		s := newFakeSpace(correct)
		s.acct.capacity = 4 << 20
		return s
	})
}

func TestBrokenDoubleFree(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, fakeSpaces(silentDoubleFree))
}

func TestBrokenSubSliceFree(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, fakeSpaces(freeByAddressOnly))
}

func TestBrokenLedger(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, fakeSpaces(uncountedFrees))
}

// newCPUExec returns a CPU executor closed at the end of the test.
func newCPUExec(t *testing.T) *cpu.Executor {
	e := cpu.NewExecutor(4)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// newHostSpace returns a CPU space closed at the end of the test.
func newHostSpace(t *testing.T) memspace.Space {
	s := cpu.NewSpace(cpu.SpaceOptions{})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestBrokenDropIndex(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, func(t *testing.T) dropExec { return dropExec{newCPUExec(t)} })
}

func TestBrokenStickyError(t *testing.T) {
	onlyInChild(t)
	conformance.TestStream(t, func(t *testing.T) executor.Streamer {
		return wrapStreams{newCPUExec(t), func(s executor.Stream) executor.Stream { return forgetfulStream{s} }}
	})
}

func TestBrokenReorder(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(newReorderComm))
}

func TestBrokenTransfer(t *testing.T) {
	onlyInChild(t)
	conformance.TestTransfer(t, hostKindSpaces(t, "conformance-test-short-copy", shortCopy),
		conformance.Streams(func(t *testing.T) executor.Streamer { return newCPUExec(t) }))
}

func TestBrokenHang(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, func(t *testing.T) deafExec { return deafExec{newCPUExec(t)} },
		conformance.Timeout(2*time.Second))
}

func TestBrokenDeclaration(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, newCPUExec,
		conformance.Declare("executor/no-such-case", "a typo"),
		conformance.Declare("executor/name", ""))
}

// TestDeclared checks that a declaration skips the cases it names, with
// its reason, and only those.
func TestDeclared(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, newCPUExec,
		conformance.Declare("executor/parallel/nested", "nested loops are not supported here"),
		conformance.Declare("executor/execute/panic", "panics crash this executor"))
}

// TestBrokenDeclarationOutsideSuites declares a name outside every suite:
// TestSpace alone must fail, though it does not check the names of other
// suites.
func TestBrokenDeclarationOutsideSuites(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, fakeSpaces(correct),
		conformance.Declare("bogus/name", "x"),
		conformance.Declare("comm/p2p/cancel", "for the communicator suite"))
}

// fakeBackend opens a backend whose memory is a correct fakeSpace named
// name.
func fakeBackend(name string) func(t *testing.T) *xpu.Backend {
	return func(t *testing.T) *xpu.Backend {
		sp := newFakeSpace(correct)
		sp.name = name
		return &xpu.Backend{Name: "fake", Memory: sp}
	}
}

// TestBrokenDeclarationWholeName declares a whole name as go test would
// print it, but without the space's level, and a typo.
func TestBrokenDeclarationWholeName(t *testing.T) {
	onlyInChild(t)
	conformance.Run(t, fakeBackend("fake"),
		conformance.Declare("TestBrokenDeclarationWholeName/space/alloc/alignment", "x"),
		conformance.Declare("space/alloc/alignmnt", "x"))
}

// TestDeclaredWholeName declares cases by their whole names: as go test -v
// prints them, and with the space's name as the space says it, with a
// space that go test prints as an underscore.
func TestDeclaredWholeName(t *testing.T) {
	onlyInChild(t)
	conformance.Run(t, fakeBackend("fake space"),
		conformance.Declare("TestDeclaredWholeName/fake_space/space/alloc/alignment", "as printed"),
		conformance.Declare("TestDeclaredWholeName/fake space/space/alloc/typed", "with the space's own name"))
}
