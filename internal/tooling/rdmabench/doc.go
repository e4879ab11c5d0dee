// Command rdmabench is a benchmark program; tooling, not shipped by the
// library. It measures the rdma backend with one process per rank,
// as perftest and the OSU benchmarks do: started as every rank of a job
// (XPU_RANK, XPU_WORLD_SIZE, XPU_MASTER_ADDR, XPU_MASTER_PORT,
// XPU_JOB_SECRET, or a launcher's variables), it runs, on 2 ranks, an
// 8-byte ping-pong (the mean half round trip, as ib_send_lat's t_avg, and
// the median, as its t_typical),
// one-way streaming of
// 1 MiB and 4 MiB messages with 16 in flight, and Puts of the same sizes;
// on any number of ranks an allreduce of 64 MiB of float64 — named
// "allreduce.node.64MiB" when the ranks run their collectives in shared
// memory (every rank on one machine, the default), "allreduce.64MiB" when
// over the queue pairs (XPU_LINKS=tcp, or ranks on several machines). Every figure
// is the median of 5 runs, and every run checks the bytes it moved. Rank
// 0 prints one line per figure, "rdma.np2.pingpong.8B 27.1 us", in the
// format of the procs backend's tcpbench.
//
// The tests' guest (make bench-rdma) starts it beside perftest's
// ib_send_lat and ib_write_bw in the same boot.
package main
