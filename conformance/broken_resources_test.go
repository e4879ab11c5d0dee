package conformance_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/internal/hostcopy"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// TestSuiteCatchesBrokenResources runs each of the tests below in a child
// process and checks that the cases of spaces, transfers, reductions and
// leaks it is written for fail, naming the case, and that the cases that
// could not see the defect before these were added still pass.
func TestSuiteCatchesBrokenResources(t *testing.T) {
	sizes := hostcopy.Sizes()
	runChildren(t, []childCase{
		// Large blocks served on a careless path: only sizes past 1 MiB
		// show it.
		{test: "TestBrokenClassFree/^space$/^free$", want: []string{
			"--- FAIL: TestBrokenClassFree/space/free/double",
			"Free #2 of a freed block (1048577 bytes)",
			"--- FAIL: TestBrokenClassFree/space/free/sub-slice",
			"Free of a prefix (same address, shorter) [0, +524288) of class[",
			"--- FAIL: TestBrokenClassFree/space/free/foreign",
			"Free of a block of another space at the address of a live 1048577-byte block",
		}, absent: []string{"(256 bytes)", "(1048576 bytes)", "+2048) of class["}},
		// Properties that contradict each other or the memory.
		{test: "TestBrokenProperties/./^space$/^properties$", want: []string{
			"--- FAIL: TestBrokenProperties/pinned-and-pageable/space/properties",
			"memory cannot be both Pinned (page-locked) and Pageable",
			"--- FAIL: TestBrokenProperties/device-minus-one/space/properties",
			"Device -1 is host memory, which the host can access",
			"--- FAIL: TestBrokenProperties/unified-host/space/properties",
			"Device -1 is host memory, which cannot be Unified",
			"--- FAIL: TestBrokenProperties/no-view-when-large/space/properties",
			"Bytes of a 1048577-byte block of a HostAccessible space",
			"--- FAIL: TestBrokenProperties/view-not-claimed/space/properties",
			"says its memory is not HostAccessible, but its 1-byte block",
		}},
		// A split copy that drops its last, short piece: the sizes past
		// the split points catch it, the old sizes did not.
		{test: "TestBrokenPieceTail/^transfer$/^copy$/^(sync|sizes)$", want: []string{
			"--- PASS: TestBrokenPieceTail/transfer/copy/sync",
			"--- FAIL: TestBrokenPieceTail/transfer/copy/sizes",
			fmt.Sprintf("CopyBlock of %d bytes (%s)", sizes[1].N, sizes[1].What),
		}},
		// An upload that forgets the destination's offset in its
		// allocation: only copies between blocks at offsets catch it.
		{test: "TestBrokenUploadOffset/^transfer$/^copy$/^(sync|typed|overlap|offsets)$", want: []string{
			"--- PASS: TestBrokenUploadOffset/transfer/copy/sync",
			"--- PASS: TestBrokenUploadOffset/transfer/copy/typed",
			"--- PASS: TestBrokenUploadOffset/transfer/copy/overlap",
			"--- FAIL: TestBrokenUploadOffset/transfer/copy/offsets/cpu->fake-device",
			"CopyBlock of 1 bytes from offset 1 of a cpu block to offset 7 of a fake-device block: the copied range of the destination block (at 7)",
		}},
		// A split copy that ignores overlap: only large overlapping copies
		// catch it.
		{test: "TestBrokenSplitOverlap/^transfer$/^copy$/^(sizes|overlap)$", want: []string{
			"--- PASS: TestBrokenSplitOverlap/transfer/copy/sizes",
			"--- FAIL: TestBrokenSplitOverlap/transfer/copy/overlap",
			fmt.Sprintf("overlapping copy of %d bytes shifted by 1 is not a memmove", sizes[3].N),
		}, absent: []string{"overlapping copy shifted by"}},
		// A grain that follows the load: the integer reduction passes, the
		// floating-point one does not give the same bits.
		{test: "TestBrokenAdaptiveGrain/^executor$/^parallel$", want: []string{
			"--- PASS: TestBrokenAdaptiveGrain/executor/parallel/reduce ",
			"--- PASS: TestBrokenAdaptiveGrain/executor/parallel/range/chunks",
			"--- FAIL: TestBrokenAdaptiveGrain/executor/parallel/reduce/deterministic",
			"float64 of mixed magnitudes with grain 0",
			"bit for bit, as Reduce promises for a given grain",
		}},
		// One goroutine leaked per component, each caught by the suite of
		// its concept called alone.
		{test: "TestBrokenLeakySpace/^space$/^(alloc|no-leak)$", want: []string{
			"--- FAIL: TestBrokenLeakySpace/space/no-leak",
			"goroutines started during the space suite are still running",
			"TestBrokenLeakySpace/space/alloc/sizes",
			"conformance_test.leakyScrubber",
		}},
		{test: "TestBrokenLeakyPool/^pool$/^(space|no-leak)$/^alloc$", want: []string{
			"--- FAIL: TestBrokenLeakyPool/pool/no-leak",
			"goroutines started during the pool suite are still running",
			"TestBrokenLeakyPool/pool/space/alloc/",
			"conformance_test.leakyScrubber",
		}},
		{test: "TestBrokenLeakyExecutor/^executor$/^(execute|no-leak)$", want: []string{
			"--- FAIL: TestBrokenLeakyExecutor/executor/no-leak",
			"goroutines started during the executor suite are still running",
			"conformance_test.leakyExec.Execute",
		}},
		{test: "TestBrokenLeakyStream/^stream$", want: []string{
			"--- PASS: TestBrokenLeakyStream/stream/close/no-leak",
			"--- FAIL: TestBrokenLeakyStream/stream/no-leak",
			"goroutines started during the stream suite are still running",
			"TestBrokenLeakyStream/stream/synchronize/canceled",
			"conformance_test.leakyStream.Synchronize",
		}},
		{test: "TestBrokenLeakyTransfer/^transfer$/^(copy|no-leak)$/^sync$", want: []string{
			"--- PASS: TestBrokenLeakyTransfer/transfer/copy/sync",
			"--- FAIL: TestBrokenLeakyTransfer/transfer/no-leak",
			"goroutines started during the transfer suite are still running",
			"conformance_test.leakyCopy",
		}},
		{test: "TestBrokenLeakyComm/^comm$/^(p2p|close|no-leak)$", want: []string{
			"--- PASS: TestBrokenLeakyComm/comm/close/no-leak",
			"--- FAIL: TestBrokenLeakyComm/comm/no-leak",
			"goroutines started during the comm suite are still running",
			"conformance_test.leakyRequest.Wait",
		}},
	})
}

func TestBrokenClassFree(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, func(*testing.T) *classSpace {
		s := newClassSpace()
		s.careless = true
		return s
	})
}

func TestBrokenProperties(t *testing.T) {
	onlyInChild(t)
	pinned := hostProps
	pinned.Pinned = true
	unified := hostProps
	unified.Unified, unified.DeviceAccessible = true, true
	for name, tc := range map[string]struct {
		props  memspace.Properties
		noView bool
	}{
		"pinned-and-pageable": {props: pinned},
		"device-minus-one":    {props: memspace.Properties{Kind: "conformance-test-dev", Device: -1, DeviceAccessible: true, Alignment: 256}},
		"unified-host":        {props: unified},
		"no-view-when-large":  {props: hostProps, noView: true},
		"view-not-claimed":    {props: memspace.Properties{Kind: "conformance-test-hidden", Device: 0, DeviceAccessible: true, Alignment: 16}},
	} {
		t.Run(name, func(t *testing.T) {
			conformance.TestSpace(t, func(*testing.T) *classSpace {
				s := newClassSpace()
				s.props, s.noView = tc.props, tc.noView
				return s
			})
		})
	}
}

// hostKindSpaces registers path for every pair of kind and "host", until
// t ends, and returns a factory of one host-accessible space of that kind.
func hostKindSpaces(t *testing.T, kind string, path transfer.PathFunc) func(*testing.T) []memspace.Space {
	t.Cleanup(registerKind(kind, path))
	return func(*testing.T) []memspace.Space {
		s := newFakeSpace(correct)
		s.kind = kind
		return []memspace.Space{s}
	}
}

func TestBrokenPieceTail(t *testing.T) {
	onlyInChild(t)
	conformance.TestTransfer(t, hostKindSpaces(t, "conformance-test-piece-tail", splitCopy(true)))
}

func TestBrokenSplitOverlap(t *testing.T) {
	onlyInChild(t)
	conformance.TestTransfer(t, hostKindSpaces(t, "conformance-test-split-overlap", splitCopy(false)))
}

func TestBrokenUploadOffset(t *testing.T) {
	onlyInChild(t)
	// Newer than the fake device's own upload path, so it serves instead.
	t.Cleanup(transfer.Register(deviceKind, "host", transfer.PathFunc(uploadIgnoringOffset)))
	conformance.TestTransfer(t, func(t *testing.T) []memspace.Space {
		return []memspace.Space{newFakeDevice(), newHostSpace(t)}
	})
}

func TestBrokenAdaptiveGrain(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, func(t *testing.T) adaptiveExec {
		return adaptiveExec{Executor: newCPUExec(t), busy: new(atomic.Int32)}
	})
}

// leakyScrubber is the goroutine the leaky space starts for its large
// blocks, and never stops.
func leakyScrubber() { <-never }

// newLeakySpace returns a classSpace that starts a leakyScrubber on its
// first large allocation.
func newLeakySpace(*testing.T) *classSpace {
	s := newClassSpace()
	var once sync.Once
	s.onLarge = func() { once.Do(func() { go leakyScrubber() }) }
	return s
}

func TestBrokenLeakySpace(t *testing.T) {
	onlyInChild(t)
	conformance.TestSpace(t, newLeakySpace)
}

func TestBrokenLeakyPool(t *testing.T) {
	onlyInChild(t)
	conformance.TestPool(t, func(t *testing.T) memspace.Space { return newLeakySpace(t) })
}

func TestBrokenLeakyExecutor(t *testing.T) {
	onlyInChild(t)
	conformance.TestExecutor(t, func(t *testing.T) leakyExec {
		return leakyExec{Executor: newCPUExec(t), once: new(sync.Once)}
	})
}

func TestBrokenLeakyStream(t *testing.T) {
	onlyInChild(t)
	conformance.TestStream(t, func(t *testing.T) executor.Streamer {
		return wrapStreams{newCPUExec(t), func(s executor.Stream) executor.Stream { return leakyStream{s} }}
	})
}

func TestBrokenLeakyTransfer(t *testing.T) {
	onlyInChild(t)
	conformance.TestTransfer(t, hostKindSpaces(t, "conformance-test-leaky-copy", leakyCopy))
}

func TestBrokenLeakyComm(t *testing.T) {
	onlyInChild(t)
	conformance.TestComm(t, wrappedGroup(wrapRequests(func(r comm.Request) comm.Request { return leakyRequest{r} })),
		conformance.MaxRanks(3))
}
