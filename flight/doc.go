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
// collectives, Put, Get) in the recorder of the communicator,
// found with comm.FlightRecorder; the in-tree backends record the
// requests they start (Isend, Irecv) themselves, through the shared
// point-to-point core. A third-party backend gets the operations of
// package comm recorded with nothing to do; to have its own requests
// recorded too, it keeps a Recorder and implements comm.Recording.
//
// A record takes no lock: a point-to-point entry costs one atomic add and
// a few stores, a collective's a few stores (collectives run one at a
// time), with a clock of DefaultTick's resolution read from memory
// (time.Now costs a third of a shared-memory message of 8 bytes; ADR 39,
// 48). Ending a posted entry takes no lock unless the operation failed:
// a load and a store of one word (ADR 46, 47, 50), so an operation posted
// before it waits pays little for its record when it completes. The time
// from an entry's post to its end is kept to ~1 µs (1,024 ns). DefaultSize entries are
// kept by default (EnvSize), at most MaxSize; a size of 0 turns the
// recorder off (Off).
//
// A rank writes its records (one JSON document per recorder,
// flight.rank<R>.<N>.json) into the directory EnvDir names — `xpu run`
// sets it to one of the job's own — on DumpSignal (SIGUSR2, which `xpu
// run` sends when its --timeout expires; the rank goes on), on SIGQUIT
// (before Go's own traceback and exit, which it keeps), and once when a
// collective is revoked; a program writes them when it likes (WriteAll,
// Recorder.WriteFile, Recorder.WriteTo, comm.DumpFlight). The signals are
// taken only while EnvDir is set and a recorder of New is open. `xpu
// flight DIR` analyses the records of a job started by mpirun or srun.
package flight
