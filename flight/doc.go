// Package flight is the flight recorder of communicators: each keeps a
// ring of its rank's recent operations — point-to-point, one-sided and
// collective — with the peer or root, the tag, the element count and type,
// the collective's sequence number, the state (posted, matched, done,
// failed, cancelled) and the times. When a job fails or hangs, the records
// of its ranks say who waits where, and why: Analyze names the ranks that
// wait and since when, collectives the ranks entered in different orders
// or with different arguments, ranks that never entered a collective the
// others wait in, and messages sent that no receive matched.
//
// Package comm records the operations its functions run (Send, Recv,
// collectives, Put, Get, Flush) in the recorder of the communicator,
// found with comm.FlightRecorder; the in-tree backends record the
// requests they start (Isend, Irecv) themselves, through the shared
// point-to-point core. A third-party backend gets the operations of
// package comm recorded with nothing to do; to have its own requests
// recorded too, it keeps a Recorder and implements comm.Recording.
//
// A record costs a lock and a few stores, with a clock of DefaultTick's
// resolution read from memory: time.Now costs more than a shared-memory
// message of 8 bytes. DefaultSize entries are kept by default, at most
// MaxSize; a size of 0 turns the recorder off (Off).
//
// A rank writes its record (Dump, one JSON document) when asked through
// the API (Recorder.WriteTo, comm.DumpFlight), when a collective is
// revoked, and — when XPU_FLIGHT_DIR names a directory, as `xpu run` sets
// it — into that directory on SIGQUIT (before Go's own traceback, which it
// keeps) or on the signal `xpu run` sends when its --timeout expires.
// `xpu flight DIR` analyses the dumps in a directory, for jobs started by
// mpirun or srun.
package flight
