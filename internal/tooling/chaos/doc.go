// Package chaos is the chaos runner of make chaos; tooling, not shipped by
// the library. It runs a repeatable chaos test of the procs backend and of
// the launcher behind `xpu run` (package launch), on Linux.
//
// Each repetition starts a launcher process, which runs a job of Config.Ranks
// rank processes through launch.Run; the ranks join over TCP (tcp.FromEnv)
// and run allreduces in a loop — small and large, alternately — each rank
// checking every result. At a random moment one fault strikes — drawn from
// Config.Window after the launcher starts or, for Config.JoinShare of the
// repetitions, within 20ms of the victim's process appearing, while the job
// still forms:
//
//   - kill: a random rank gets SIGKILL;
//   - stop: a random rank gets SIGSTOP (it is frozen: no FIN, no RST, no
//     heartbeat);
//   - cut: a random rank's packets are dropped, either to and from one
//     random peer or all of them (the ranks run in network namespaces joined
//     by a bridge, and iptables drops the packets in the victim's namespace;
//     where namespaces cannot be made, these repetitions are skipped, saying
//     why);
//   - launcher-kill: the launcher gets SIGKILL.
//
// The repetition then counts:
//
//   - a hang: the launcher has not ended Config.Hang after the fault;
//   - wrong results: a rank found an allreduce result wrong (every rank checks
//     each of its results until it is stopped or loses a peer);
//   - errors: a rank's allreduce failed with an error other than
//     comm.ErrPeerLost;
//   - orphans: processes of the job (found in /proc by a marker variable in
//     their environment, which the launcher passes on to the ranks) still
//     alive Config.Settle after the launcher ended;
//   - leftovers: files the job left in its temporary directory (TMPDIR is
//     one per repetition) and entries of /dev/shm that its processes mapped
//     or held open (polled while it runs) and left there.
//
// Run takes the kinds in turn and draws the victim, the moment and the
// variant of a cut from a generator seeded with Config.Seed, so that a run
// strikes the same way again (the timing of the processes varies, so the
// outcome may not); it prints a line per repetition and a table of the kinds
// against the outcomes. The process that runs it becomes a child subreaper,
// so that the processes of a job whose launcher was killed become its
// children, which it reaps.
//
// The same binary plays the launcher and the ranks: it must call IsRole and
// RunRole first thing in main (or TestMain).
package chaos
