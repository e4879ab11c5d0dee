package bench

// Pair compares two figures measured by programs that run one process per
// rank (internal/tooling/tcpbench under xpu run, the Open MPI
// reference under mpirun, the C ring's two processes): figures read from
// the reference outputs, not cases run in this process.
type Pair struct {
	// Name is the figure compared ("tcp.np2.pingpong.8B",
	// "shm.np2.pingpong.8B").
	Name string
	// Against is the figure it is compared with, measured in the same
	// session ("rawtcp.np2.pingpong.8B", "mpi.np2.pingpong.8B",
	// "vader.np2.pingpong.8B", "ring.np2.pingpong.8B").
	Against string
	// Goal is the ratio to reach, as for Case.BaselineGoal; zero shows the
	// comparison for information.
	Goal float64
	// Worst, when set, is the ratio every round must reach where Goal is
	// the median's (xpu bench rounds); zero holds every round to Goal.
	Worst float64
}

// Procs are the comparisons of the TCP communicator with one process per
// rank over TCP links: against a plain Go TCP connection between the same
// two processes, whose runs alternate with the communicator's (tcpbench: a
// ping-pong, and for the 2-rank allreduce an exchange in which both ends
// write, then read, its floor), and against Open MPI over TCP (make
// refs-mpi). `make refs-tcp` writes tcpbench's figures, over TCP links
// (XPU_LINKS=tcp), where xpu bench --ref reads them.
var Procs = []Pair{
	{"tcp.np2.pingpong.8B", "rawtcp.np2.pingpong.8B", 1.1, 0},
	{"tcp.np2.pingpong.8B", "mpi.np2.pingpong.8B", 0, 0},
	{"tcp.np2.bw.4MiB", "mpi.np2.bw.4MiB", 1.0, 0},
	{"tcp.np2.allreduce.8B", "rawtcp.np2.exchange.8B", 0, 0},
	{"tcp.np2.allreduce.8B", "mpi.np2.allreduce.8B", 1.0, 0},
	{"tcp.np2.allreduce.64KiB", "rawtcp.np2.exchange.64KiB", 0, 0},
	{"tcp.np2.allreduce.64KiB", "mpi.np2.allreduce.64KiB", 1.0, 0},
	{"tcp.np2.allreduce.64MiB", "mpi.np2.allreduce.64MiB", 1 / 1.5, 0},
	{"tcp.np2.bcast.8B", "mpi.np2.bcast.8B", 0, 0},
	{"tcp.np2.bcast.1MiB", "mpi.np2.bcast.1MiB", 0, 0},
	{"tcp.np2.alltoall.8B", "mpi.np2.alltoall.8B", 0, 0},
	{"tcp.np2.alltoall.1MiB", "mpi.np2.alltoall.1MiB", 0, 0},
	{"tcp.np4.allreduce.8B", "mpi.np4.allreduce.8B", 1.0, 0},
	{"tcp.np4.allreduce.64KiB", "mpi.np4.allreduce.64KiB", 1.0, 0},
	{"tcp.np4.allreduce.64MiB", "mpi.np4.allreduce.64MiB", 1 / 1.5, 0},
	{"tcp.np4.bcast.8B", "mpi.np4.bcast.8B", 0, 0},
	{"tcp.np4.bcast.1MiB", "mpi.np4.bcast.1MiB", 0, 0},
	{"tcp.np4.alltoall.8B", "mpi.np4.alltoall.8B", 0, 0},
	{"tcp.np4.alltoall.1MiB", "mpi.np4.alltoall.1MiB", 0, 0},
	// One-sided (Open MPI 4.1 has no one-sided transport over TCP: the
	// goals are against this link's own messages).
	{"tcp.np2.put.bw.1MiB", "tcp.np2.bw.1MiB", 0.9, 0},
	{"tcp.np2.getbatch.1024x4KiB", "tcp.np2.get.bw.4MiB", 0.8, 0},
	{"tcp.np2.putbatch.1024x4KiB", "tcp.np2.put.bw.4MiB", 0, 0},
	{"tcp.np2.putnotify.8B", "tcp.np2.put.lat.8B", 0, 0},
}

// ShmProcs are the comparisons of the same communicator when its ranks,
// on one machine, link through shared memory (internal/shm; tcpbench names
// its figures "shm.np<N>.<case>" when every link of rank 0 is one):
// against Open MPI's shared-memory transport, vader ("vader.np<N>.<case>",
// tcp_mpi_ref.c under --mca btl self,vader), and against the floor, a C
// ring between two processes that spin on C11 atomics in an anonymous
// shared mapping ("ring.np2.<case>", shm_ring_ref.c), which the 8-byte
// ping-pong is to come within twice of (ADR 44: the communicator's
// matching and ordering cost what the ring alone does not). Beside it, for
// information, the same floor measured at the same moment: a spin ring
// between tcpbench's own two processes (SpinRing, "spin.np2.pingpong.8B"),
// its runs alternating with the communicator's, and that floor against
// the C ring's (ADR 49); and, when tcpbench ran again with the flight
// recorder off (make rounds-shm ROUNDS_NOREC=1, "shm-norec.np<N>.<case>"),
// the small cases against themselves without it: the recorder's share;
// and, when ranks ran bound to processors too (make rounds-shm
// ROUNDS_BIND=1: xpu run --bind, "shm-bound.np<N>.<case>"), the small cases
// bound against vader bound: with 2 ranks, Open MPI's own default binds
// one to each core; with 4, mpirun --bind-to core:overload-allowed deals
// them to cores in turn, as --bind does ("vader-bound.np4.<case>"); and
// against themselves unbound (ADR 51).
// The same program measures the ceiling of any
// single-copy transport on the machine ("ring.np2.cma1.bw.<size>",
// "ring.np2.cma2.bw.<size>": one and two threads of a receiver copying
// the sender's buffers with process_vm_readv, nothing else): shown beside
// the streaming goal, which asks for twice vader's single copy, so that
// a run says how far that goal is within the machine's reach. `make
// refs-shm` writes the three programs' figures where xpu bench --ref
// reads them; the TCP links' ping-pong (make refs-tcp) is shown beside
// them for information.
var ShmProcs = []Pair{
	{"shm.np2.pingpong.8B", "vader.np2.pingpong.8B", 1.0, 1.2},
	{"shm.np2.pingpong.8B", "ring.np2.pingpong.8B", 2.0, 0},
	{"shm.np2.pingpong.8B", "spin.np2.pingpong.8B", 0, 0},
	{"spin.np2.pingpong.8B", "ring.np2.pingpong.8B", 0, 0},
	{"shm.np2.pingpong.8B", "shm-norec.np2.pingpong.8B", 0, 0},
	{"shm.np2.allreduce.8B", "shm-norec.np2.allreduce.8B", 0, 0},
	{"shm.np4.allreduce.8B", "shm-norec.np4.allreduce.8B", 0, 0},
	{"shm.np4.bcast.8B", "shm-norec.np4.bcast.8B", 0, 0},
	{"shm-bound.np2.pingpong.8B", "vader.np2.pingpong.8B", 1.0, 1.2},
	{"shm-bound.np2.pingpong.8B", "ring.np2.pingpong.8B", 2.0, 0},
	{"shm-bound.np2.allreduce.8B", "vader.np2.allreduce.8B", 1.0, 1.2},
	{"shm-bound.np4.allreduce.8B", "vader-bound.np4.allreduce.8B", 1.0, 1.2},
	{"shm-bound.np4.bcast.8B", "vader-bound.np4.bcast.8B", 1.0, 0},
	{"shm-bound.np2.pingpong.8B", "shm.np2.pingpong.8B", 0, 0},
	{"shm-bound.np2.allreduce.8B", "shm.np2.allreduce.8B", 0, 0},
	{"shm-bound.np4.allreduce.8B", "shm.np4.allreduce.8B", 0, 0},
	{"shm-bound.np4.bcast.8B", "shm.np4.bcast.8B", 0, 0},
	{"shm.np2.pingpong.8B", "tcp.np2.pingpong.8B", 0, 0},
	{"shm.np2.bw.1MiB", "vader.np2.bw.1MiB", 2.0, 0},
	{"shm.np2.bw.1MiB", "ring.np2.bw.1MiB", 0, 0},
	{"shm.np2.bw.1MiB", "ring.np2.cma2.bw.1MiB", 0, 0},
	{"ring.np2.cma2.bw.1MiB", "vader.np2.bw.1MiB", 0, 0},
	{"ring.np2.cma1.bw.1MiB", "vader.np2.bw.1MiB", 0, 0},
	{"shm.np2.bw.4MiB", "vader.np2.bw.4MiB", 2.0, 0},
	{"shm.np2.bw.4MiB", "ring.np2.bw.4MiB", 0, 0},
	{"shm.np2.bw.4MiB", "ring.np2.cma2.bw.4MiB", 0, 0},
	{"ring.np2.cma2.bw.4MiB", "vader.np2.bw.4MiB", 0, 0},
	{"ring.np2.cma1.bw.4MiB", "vader.np2.bw.4MiB", 0, 0},
	{"shm.np2.allreduce.8B", "vader.np2.allreduce.8B", 1.0, 1.2},
	{"shm.np2.allreduce.64KiB", "vader.np2.allreduce.64KiB", 0, 0},
	{"shm.np2.allreduce.64MiB", "vader.np2.allreduce.64MiB", 1 / 1.5, 0},
	{"shm.np2.bcast.8B", "vader.np2.bcast.8B", 0, 0},
	{"shm.np2.bcast.1MiB", "vader.np2.bcast.1MiB", 0, 0},
	{"shm.np2.alltoall.8B", "vader.np2.alltoall.8B", 0, 0},
	{"shm.np2.alltoall.1MiB", "vader.np2.alltoall.1MiB", 0, 0},
	{"shm.np4.allreduce.8B", "vader.np4.allreduce.8B", 1.0, 1.2},
	{"shm.np4.allreduce.64KiB", "vader.np4.allreduce.64KiB", 0, 0},
	{"shm.np4.allreduce.64MiB", "vader.np4.allreduce.64MiB", 1 / 1.5, 0},
	{"shm.np4.bcast.8B", "vader.np4.bcast.8B", 1.0, 0},
	{"shm.np4.bcast.1MiB", "vader.np4.bcast.1MiB", 0, 0},
	{"shm.np4.alltoall.8B", "vader.np4.alltoall.8B", 0, 0},
	{"shm.np4.alltoall.1MiB", "vader.np4.alltoall.1MiB", 0, 0},
	// One-sided, against MPI_Put and MPI_Get with MPI_Win_flush in a
	// window of the program's own memory (MPI_Win_create), and the
	// machine's single copy.
	{"shm.np2.put.lat.8B", "vader.np2.put.lat.8B", 1.0, 0},
	{"shm.np2.get.lat.8B", "vader.np2.get.lat.8B", 0, 0},
	{"shm.np2.put.bw.1MiB", "vader.np2.put.bw.1MiB", 1.0, 0},
	{"shm.np2.put.bw.4MiB", "vader.np2.put.bw.4MiB", 1.0, 0},
	{"shm.np2.put.bw.4MiB", "ring.np2.cma1.bw.4MiB", 0.9, 0},
	{"shm.np2.get.bw.1MiB", "vader.np2.get.bw.1MiB", 1.0, 0},
	{"shm.np2.get.bw.4MiB", "vader.np2.get.bw.4MiB", 1.0, 0},
	{"shm.np2.getbatch.1024x4KiB", "shm.np2.get.bw.4MiB", 0.8, 0},
	{"shm.np2.getbatch.1024x4KiB", "vader.np2.getbatch.1024x4KiB", 0, 0},
	{"shm.np2.putbatch.1024x4KiB", "shm.np2.put.bw.4MiB", 0, 0},
	// A Put with its notification, against a Put and its Flush, and a
	// message's ping-pong.
	{"shm.np2.putnotify.8B", "shm.np2.put.lat.8B", 0, 0},
	{"shm.np2.putnotify.8B", "shm.np2.pingpong.8B", 0, 0},
}
