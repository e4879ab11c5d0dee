// Package sim is a simulated RDMA fabric in one process: the fake the rdma
// communicator's protocol is tested on, on a host without RDMA hardware
// and under the race detector. It implements the interfaces of package
// fabric and enforces every rule listed there, strictly, so that a protocol
// that passes here does not depend on anything real verbs do not promise.
//
// A Network is the wire. Network.Provider gives a host (an IPv4 address)
// its device, "sim0"; opening it gives a Context. The ranks of a test are
// Contexts of one Network, each from its own Provider or all from one.
//
// What the simulation checks, and what a protocol must therefore do:
//   - Memory is real process memory. Register keeps the pointer it is given,
//     which keeps Go memory alive until Deregister; keys are random, never
//     reused, and distinct across the Network. Every piece of a work request
//     is checked when it executes, not when it is posted: a local piece
//     outside a region of the endpoint's Context named by its LKey completes
//     with ErrLocal; a remote piece outside a region of the peer's Context
//     named by RKey completes with ErrRemote. Zero-length pieces are not
//     checked.
//   - Requests execute asynchronously, on a goroutine per endpoint, in the
//     order posted, and their bytes are read and written when they execute:
//     a buffer changed between post and completion sends what it holds
//     then (WithDelays widens that window). Inline SENDs and WRITEs copy at
//     post time. Every access happens under the Network's one lock, so the
//     race detector cannot be relied on to see such reuse.
//   - A SEND consumes the oldest receive posted on the peer. If none is
//     posted, or it is shorter than the message, nothing retries: the SEND
//     completes with ErrRemote, both endpoints go to the error state, and
//     Stats counts a receiver-not-ready error (RNR).
//   - Any error puts both endpoints of the connection in the error state:
//     Lost closes on both, and every outstanding request completes, the
//     first with its own error and the rest with ErrFlushed. When a peer
//     fails on its own (Fail, Kill, a local error) the oldest unexecuted
//     send request completes with ErrRemote, as retry-exceeded would. A
//     post on an endpoint in the error state or closed returns an error and
//     posts nothing.
//   - Queue depths are those of EndpointConfig and the slots of a request
//     are freed only when Poll takes its completion: an unsignaled send
//     request holds its slot until a later signaled one of the endpoint is
//     polled, and a receive until its completion is polled. A post over the
//     depth returns an error (ENOMEM in verbs) and posts nothing.
//   - The completion queue holds cqDepth completions not yet polled; one
//     more overruns it, which breaks the Context (Poll and Wait return an
//     error and every endpoint fails), as a real CQ overrun does.
//   - Completions name only the ID of their request: give every request an
//     ID that says its endpoint. The simulation fills Op in error
//     completions too; verbs leave the opcode of an error completion
//     undefined, so do not rely on it there.
//   - Closing an endpoint queues the flush completions of its outstanding
//     requests. Real verbs may drop them when the queue pair is destroyed:
//     a protocol must neither wait for them after Close nor choke on them.
//
// Connections are made by address: Listen("ip:0") picks a free port,
// Listener.Addr says which, and Dial connects to exactly that string.
// Nobody listening, a Reject, or a listener closed before it answers make
// Dial fail with an error matching ErrRefused. Both endpoints are connected
// when Request.Accept returns, so either side may SEND at once: the peer
// may not have posted its receives yet.
//
// Tests drive the Network with Pause and Resume (no request executes in
// between), Kill (a process dies: its endpoints fail, its peers see them
// lost, its memory becomes unreachable), WithDelays (seeded random delays
// before each request, to shake out assumptions about the order of
// different endpoints) and Stats.
//
// Every method is safe for concurrent use; Poll and Wait belong to one
// goroutine per Context, as in package fabric. Context.Close ends every
// goroutine the Context started before it returns.
package sim
