// Command tcpbench is a benchmark program; tooling, not shipped by the
// library. It measures the TCP communicator with one process per
// rank. Start it under any launcher that tcp.FromEnv understands — xpu
// run, or mpirun used only as a process starter:
//
//	go build -o /tmp/tcpbench ./internal/tooling/tcpbench
//	mpirun --allow-run-as-root --oversubscribe -np 2 -x XPU_JOB_SECRET=$RANDOM$RANDOM /tmp/tcpbench
//
// Rank 0 prints one line per figure, "<name> <median> <unit>", with names
// "<links>.np<N>.<case>" matching the lines of
// internal/tooling/bench/ref/tcp_mpi_ref.c ("mpi.np<N>.<case>", or the prefix it is
// given), so the two outputs compare line by line. <links> names the links
// rank 0 uses: "shm" when every peer is reached through shared memory (the
// default on one machine), "tcp" when every one through TCP (XPU_LINKS=tcp),
// "mixed" otherwise, followed by "-norec" when the flight recorder is off
// (XPU_FLIGHT_SIZE=0: "shm-norec.np2.pingpong.8B"), and by "-L" with
// -label L (xpu run --bind … -label bound: "shm-bound.np2.pingpong.8B",
// "spin-bound.np2.pingpong.8B"). Each figure is the
// median of 5 runs. With 2 ranks
// linked through TCP it also measures the ping-pong over a plain Go TCP
// connection between the same two processes, its runs alternating with the
// communicator's ("rawtcp.np2.pingpong.8B"); with 2 ranks linked through
// shared memory, the ping-pong of a spin ring between the same two
// processes (bench.SpinRing), its runs alternating with the
// communicator's ("spin.np2.pingpong.8B"); with 2 ranks, one-way
// bandwidth of 1 MiB and 4 MiB messages. With -o FILE rank 0 appends its lines to FILE instead (make
// refs-tcp and make refs-shm collect them there for xpu bench); with
// -cpuprofile FILE rank r writes a CPU profile to FILE.r; with -only RE it
// runs only the cases whose names (the part after "np<N>.") match RE.
package main
