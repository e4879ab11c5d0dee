package xpu

import (
	"slices"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
)

// Capability names that Info.Capabilities lists. A driver names its
// capabilities with these constants, never with string literals, so that a
// name means one thing across backends and `xpu info`.
//
// The concept-level capabilities (Derived) say that a component implements
// an optional interface of its concept. A driver does not write them: it
// takes them from CapabilitiesOf over its component types, and the
// conformance suite checks that an opened backend's components implement
// exactly the derived capabilities its Info lists. The others describe
// behaviour no interface shows (which wildcards are honoured, how messages
// travel); the conformance suite tests the behaviour where it can.
const (
	// Concept-level: derived from the interfaces implemented.

	CapP2P               = "p2p"                // a comm.Comm: point-to-point messages
	CapBlocking          = "blocking"           // comm.Blocking: Send and Recv without a Request
	CapCollectivesNative = "collectives.native" // comm.Collectives: collectives of its own
	CapOneSided          = "onesided"           // comm.OneSided: Put and Get of exposed memory
	CapNotify            = "onesided.notify"    // comm.Notifier: notifications after one-sided transfers
	CapParallel          = "parallel"           // executor.Parallel: ParallelFor, ParallelRange
	CapStreams           = "streams"            // executor.Streamer: ordered asynchronous queues
	CapEventsTiming      = "events.timing"      // executor.TimedEvent: elapsed time between events
	CapMemoryStats       = "memory.stats"       // memspace.StatsSpace: a ledger of bytes in use
	CapMemoryLookup      = "memory.lookup"      // memspace.Lookuper: an address to its block
	CapMemoryAvailable   = "memory.available"   // memspace.Availability: free and total bytes

	// Behaviour: communicators.

	CapAnySource      = "anysource"               // receives from comm.AnySource
	CapAnyTag         = "anytag"                  // receives with comm.AnyTag
	CapCancel         = "cancel"                  // Request.Cancel of sends and receives
	CapCancelRecv     = "cancel.recv"             // Request.Cancel of receives only
	CapEager          = "eager"                   // small messages sent before their receive is posted
	CapRendezvous     = "rendezvous"              // large messages land straight in the receive buffer
	CapGroup          = "group"                   // Backend.Group: groups of ranks in this process
	CapKill           = "kill"                    // a rank can be made to fail, for tests
	CapMultiprocess   = "multiprocess"            // ranks in separate processes (Backend.Comm in a job)
	CapAuthHMAC       = "auth.hmac"               // peers prove a shared job secret
	CapPeerLostTimer  = "peer-lost.timeout"       // a silent peer is declared lost after a timeout
	CapCollectivesNB  = "collectives.nonblocking" // nonblocking native collectives
	CapInPlace        = "inplace"                 // in-place collectives
	CapSplit          = "split"                   // communicators split by color
	CapDup            = "dup"                     // communicators duplicated
	CapThreadsSerial  = "threads.serialized"      // calls serialised behind one lock
	CapThreadsMulti   = "threads.multiple"        // concurrent calls from any goroutine
	CapThreadsUnknown = "threads.unknown-until-open"
	CapSharedMemory   = "transport.shm" // ranks of one node talk through shared memory

	// Behaviour: memory and executors.

	CapMemoryLimit     = "memory.limit"     // a cap on the bytes in use, as an option
	CapParallelNested  = "parallel.nested"  // a parallel body may start parallel work
	CapParallelDynamic = "parallel.dynamic" // chunks are handed out as workers free up
	CapTransferHostPar = "transfer.host-parallel"
)

// Derived lists the concept-level capabilities, those CapabilitiesOf
// derives from the interfaces a component implements, in the order it
// lists them.
var Derived = []string{
	CapP2P, CapBlocking, CapCollectivesNative, CapOneSided, CapNotify,
	CapParallel, CapStreams, CapEventsTiming,
	CapMemoryStats, CapMemoryLookup, CapMemoryAvailable,
}

// derivations pairs each concept-level capability with the test of the
// interface it stands for, in the order of Derived.
var derivations = []struct {
	name string
	has  func(any) bool
}{
	{CapP2P, implements[comm.Comm]},
	{CapBlocking, implements[comm.Blocking]},
	{CapCollectivesNative, implements[comm.Collectives]},
	{CapOneSided, implements[comm.OneSided]},
	{CapNotify, implements[comm.Notifier]},
	{CapParallel, implements[executor.Parallel]},
	{CapStreams, implements[executor.Streamer]},
	{CapEventsTiming, implements[executor.TimedEvent]},
	{CapMemoryStats, implements[memspace.StatsSpace]},
	{CapMemoryLookup, implements[memspace.Lookuper]},
	{CapMemoryAvailable, implements[memspace.Availability]},
}

func implements[I any](c any) bool {
	_, ok := c.(I)
	return ok
}

// CapabilitiesOf returns, sorted, the concept-level capabilities of the
// given components: each name of Derived whose interface one of them
// implements. Components may be typed nil pointers, so a driver's Info can
// derive its list from its types without opening anything:
//
//	xpu.CapabilitiesOf((*Space)(nil), (*Executor)(nil), (*event)(nil))
func CapabilitiesOf(components ...any) []string {
	var out []string
	for _, d := range derivations {
		if slices.ContainsFunc(components, d.has) {
			out = append(out, d.name)
		}
	}
	slices.Sort(out)
	return out
}
