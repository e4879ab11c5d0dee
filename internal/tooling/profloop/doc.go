// Command profloop is a profiling program; tooling, not shipped by the
// library. It runs one small operation of the procs communicator in a loop
// for a while on every rank, with a CPU profile per rank, so that the
// share of each layer of one call can be read from the profile (ADR 45):
//
//	go build -o /tmp/profloop ./internal/tooling/profloop
//	./bin/xpu run -n 2 -- /tmp/profloop -op allreduce -d 5s -cpuprofile /tmp/ar.prof
//	go tool pprof -top -cum /tmp/profloop /tmp/ar.prof.0
//
// -op names the operation, on one float64: "allreduce" (comm.Allreduce,
// Sum), "allreduce-direct" (the communicator's own Allreduce, past package
// comm), "bcast" (comm.Bcast from rank 0) or "pingpong" (comm.Send and
// comm.Recv between ranks 0 and 1, others idle). -d is how long the loop
// runs; every 10,000 calls the ranks agree whether it is over, so that
// all stop after the same call. Rank 0 prints "<op> <ns> ns/op" (a
// ping-pong's op is a round trip). With -cpuprofile FILE rank r writes its
// profile to FILE.r, leaving out a warm-up of 20,000 calls; with -trace
// FILE it writes the runtime's execution trace of the same calls to
// FILE.r: how often each goroutine yields, blocks and wakes, and
// where (go tool trace -d=parsed FILE.r prints its events; ADR 47). With
// -every D rank 0 also prints the time per call of each interval of about
// D, "<seconds> <ns> ns/op": how the figure moves within one run (ADR 48);
// rank 0's clock ends each interval, and all ranks learn it with the
// vote on the loop's end. With -sched (Linux) each interval's line also
// gives the scheduler's counts over it, summed over every thread of every
// rank (/proc/self/task/*/sched): context switches, the involuntary ones
// (a thread preempted, not blocked) and migrations between processors;
// at the end rank 0 prints their means over the fastest and the slowest
// third of the intervals, and the correlation of the time per call with
// each: whether the slow moments are those where the ranks' threads are
// switched and moved.
// With -floor and 2 ranks on one machine, each 10,000 calls are followed
// by 10,000 round trips of a spin ring between the same two processes
// (bench.SpinRing, the floor of a ping-pong), which the calls' time leaves
// out; rank 0 prints each pair and their ratio, and at the end their
// percentiles and correlation: whether the loop and the floor move
// together from one moment to the next (ADR 49).
package main
