// Command tcpbench measures the TCP communicator with one process per
// rank. Start it under any launcher that tcp.FromEnv understands — xpu
// run, or mpirun used only as a process starter:
//
//	go build -o /tmp/tcpbench ./backends/tcp/internal/tcpbench
//	mpirun --allow-run-as-root --oversubscribe -np 2 -x XPU_JOB_SECRET=$RANDOM$RANDOM /tmp/tcpbench
//
// Rank 0 prints one line per figure, "<name> <median> <unit>", with names
// "tcp.np<N>.<case>" matching the lines of internal/bench/ref/tcp_mpi_ref.c
// ("mpi.np<N>.<case>"), so the two outputs compare line by line. Each
// figure is the median of 5 runs. With 2 ranks it also measures the
// ping-pong over a plain Go TCP connection between the same two processes,
// its runs alternating with the communicator's ("rawtcp.np2.pingpong.8B").
// With -o FILE rank 0 appends its lines to FILE instead (make refs-tcp
// collects them there for xpu bench).
package main
