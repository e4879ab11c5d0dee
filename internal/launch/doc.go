// Package launch starts the ranks of a job on this machine: the logic behind
// `xpu run`.
//
// Run starts Spec.N copies of a program, each in its own process group, with
// an environment that tells it its place in the job (EnvRank, EnvWorldSize,
// EnvLocalRank, EnvLocalSize, EnvMasterAddr, EnvMasterPort, EnvJobSecret and
// EnvBackend: the names of package jobenv), and waits for them:
//
//	res, err := launch.Run(ctx, launch.Spec{N: 4, Prog: "./allreduce"})
//
// Every line a rank writes is copied to Spec.Stdout or Spec.Stderr with the
// rank as a prefix ("[3] "). Lines are written whole, one Write per batch of
// complete lines under a lock shared by every rank and both streams, so lines
// of different ranks never interleave mid-line; a last line without a newline
// is completed with one when its rank exits. A line longer than MaxLine is
// cut into several prefixed lines.
//
// The job succeeds only when every rank exits with status 0. When a rank
// fails (a non-zero status, a signal, or an error to wait for it), the
// others have Spec.FailGrace to end on their own (a rank panicking in main
// runs its deferred calls before Go prints the panic); then Run sends
// SIGTERM to the process group of every rank still running, SIGKILL after
// Spec.Grace. It returns a *RankError that names the root cause: the first
// rank to end abnormally, by time, whose failure no lost peer explains, as
// the ranks report the peers they lose (package rankevent; cause.go has the
// rules, docs/adr/0038-root-cause-first.md the reasons). With
// Spec.LogPrefix it reports the cause with the last TailLines lines of its
// stderr, and the other ranks as its consequences. When ctx is cancelled Run forwards the signal that cancelled it
// (SIGINT or SIGTERM, read from the cause that signal.NotifyContext gives;
// SIGTERM otherwise) the same way and returns an error matching ctx.Err();
// Spec.Timeout does the same with an error matching ErrJobTimeout and
// context.DeadlineExceeded. Run returns only after every rank has been
// reaped and its output copied, so it leaves no process or goroutine behind
// (a rank's own children that outlive it and keep its output open are cut
// off Spec.Grace after it exits). A rank Run stops is stopped with its
// group: its children still there at the end of the grace period get
// SIGKILL even when the rank itself has exited, Run waiting the grace
// period out for them.
//
// On Linux, ranks do not outlive the process that runs Run, however it
// dies, SIGKILL included (ADR 22). Each rank has SIGKILL as its
// parent-death signal, from a thread that lives until the rank is reaped;
// and each job has a watchdog, this very program executed again in a
// session of its own, which is told the ranks' process groups through a
// pipe: when the pipe reads end-of-file without the launcher's goodbye, it
// stops the groups still registered — SIGTERM, SIGKILL after Spec.Grace —
// and exits. Run reaps it when the job ends. So that a rank cannot start
// a child before the watchdog knows its group, each rank starts as a gate,
// the program again, which executes the rank's program in its own process
// once the launcher has registered the group. Any binary that links the
// package serves as its own watchdog and gate: the package's init runs
// them instead of the program when it finds the marks Run starts them with
// (argv[0] "xpu-watchdog" and XPU_LAUNCH_WATCHDOG=1, argv[0]
// "xpu-rank-gate" and XPU_LAUNCH_GATE=1).
//
// With Spec.Bind, on Linux, each rank is bound from its start to its share
// of the processors the caller may run on (bind.go): the thread that starts
// it is bound to them for the moment of the start, and the rank inherits
// the set.
//
// When Spec.Prog is `go run`, Run builds the program once with `go build`
// into a temporary directory and starts the binary N times, rather than
// having N concurrent `go run` commands compile it N times; Spec.NoBuild
// turns this off (see GoRun).
//
// RunMPI hands the job to mpirun instead (Open MPI or MPICH), for the MPI
// backend, which learns its rank and size from MPI itself.
//
// Run and RunMPI may be called concurrently; each call is a separate job.
package launch
