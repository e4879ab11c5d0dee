// Package rankevent is what a rank of an `xpu run` job tells its launcher
// about the job's end: that it lost a peer, when, and how (the peer said
// goodbye, or vanished). The launcher reads it to tell the root cause of a
// failure from its consequences (docs/adr/0038-root-cause-first.md): a rank
// that failed after it lost a peer failed because of that peer.
//
// The launcher names a file in the rank's environment (jobenv.Events);
// PeerDown appends one line of JSON to it per event, opening and closing it
// each time (events are rare: a handful per rank, at the end of a job), with
// one write of at most MaxLine bytes, which O_APPEND keeps whole when ranks
// write at once. Without the variable PeerDown does nothing, so a rank
// started by mpirun, srun or by hand pays nothing. The file is never
// created by a rank: one the launcher has removed stays removed.
//
// PeerDown may be called from any goroutine; it does not block beyond a
// write to a local file, and it never fails: an event that cannot be
// written is dropped, the launcher then falling back on the order of the
// ranks' exits.
package rankevent
