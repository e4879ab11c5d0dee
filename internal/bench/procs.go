package bench

// Pair compares two figures measured by programs that run one process per
// rank (backends/tcp/internal/tcpbench under xpu run, the Open MPI
// reference under mpirun): figures read from the reference outputs, not
// cases run in this process.
type Pair struct {
	// Name is the figure compared ("tcp.np2.pingpong.8B").
	Name string
	// Against is the figure it is compared with, measured in the same
	// session ("rawtcp.np2.pingpong.8B", "mpi.np2.pingpong.8B").
	Against string
	// Goal is the ratio to reach, as for Case.BaselineGoal; zero shows the
	// comparison for information.
	Goal float64
}

// Procs are the comparisons of the TCP communicator with one process per
// rank: against a plain Go TCP connection between the same two processes,
// whose runs alternate with the communicator's (tcpbench: a ping-pong, and
// for the 2-rank allreduce an exchange in which both ends write, then
// read, its floor), and against Open MPI over TCP (make refs-mpi). `make refs-tcp` writes tcpbench's
// figures where xpu bench --ref reads them.
var Procs = []Pair{
	{"tcp.np2.pingpong.8B", "rawtcp.np2.pingpong.8B", 1.1},
	{"tcp.np2.pingpong.8B", "mpi.np2.pingpong.8B", 0},
	{"tcp.np2.bw.4MiB", "mpi.np2.bw.4MiB", 1.0},
	{"tcp.np2.allreduce.8B", "rawtcp.np2.exchange.8B", 0},
	{"tcp.np2.allreduce.8B", "mpi.np2.allreduce.8B", 1.0},
	{"tcp.np2.allreduce.64KiB", "rawtcp.np2.exchange.64KiB", 0},
	{"tcp.np2.allreduce.64KiB", "mpi.np2.allreduce.64KiB", 1.0},
	{"tcp.np2.allreduce.64MiB", "mpi.np2.allreduce.64MiB", 1 / 1.5},
	{"tcp.np2.bcast.8B", "mpi.np2.bcast.8B", 0},
	{"tcp.np2.bcast.1MiB", "mpi.np2.bcast.1MiB", 0},
	{"tcp.np2.alltoall.8B", "mpi.np2.alltoall.8B", 0},
	{"tcp.np2.alltoall.1MiB", "mpi.np2.alltoall.1MiB", 0},
	{"tcp.np4.allreduce.8B", "mpi.np4.allreduce.8B", 1.0},
	{"tcp.np4.allreduce.64KiB", "mpi.np4.allreduce.64KiB", 1.0},
	{"tcp.np4.allreduce.64MiB", "mpi.np4.allreduce.64MiB", 1 / 1.5},
	{"tcp.np4.bcast.8B", "mpi.np4.bcast.8B", 0},
	{"tcp.np4.bcast.1MiB", "mpi.np4.bcast.1MiB", 0},
	{"tcp.np4.alltoall.8B", "mpi.np4.alltoall.8B", 0},
	{"tcp.np4.alltoall.1MiB", "mpi.np4.alltoall.1MiB", 0},
}
