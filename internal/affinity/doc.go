// Package affinity reads and sets the processors a process or a thread may
// run on: the one place where package launch (xpu run --bind) and the
// procs backend (whether a rank shares its processors) ask the system. On
// Linux it calls sched_getaffinity and sched_setaffinity; elsewhere every
// call fails with an error matching xerr.ErrNotSupported.
package affinity
