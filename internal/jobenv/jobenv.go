package jobenv

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xpu-go/xpu/xerr"
)

// The variables `xpu run` sets in every rank, and XPU_BACKEND, which
// xpu.OpenDefault reads.
const (
	Rank       = "XPU_RANK"        // the rank, 0 … N-1
	WorldSize  = "XPU_WORLD_SIZE"  // N
	LocalRank  = "XPU_LOCAL_RANK"  // the rank among those on its host
	LocalSize  = "XPU_LOCAL_SIZE"  // the number of ranks on its host
	MasterAddr = "XPU_MASTER_ADDR" // host of rank 0's rendezvous store
	MasterPort = "XPU_MASTER_PORT" // its port
	JobSecret  = "XPU_JOB_SECRET"  // the key that authenticates the job's ranks to each other
	Backend    = "XPU_BACKEND"     // the backend chain of xpu.OpenDefault ("cuda,cpu")
	// Events names the file a rank appends its events to (a peer lost,
	// with when and how), for `xpu run` to tell a failure's cause from its
	// consequences: package internal/rankevent writes and reads it.
	Events = "XPU_RUN_EVENTS"
)

// The settings of the multi-process transports, read by every transport
// they concern (docs/launching.md has them in one table). A duration of
// zero in a spin setting means no spin; an unset variable means the
// transport's default.
const (
	JoinTimeout = "XPU_JOIN_TIMEOUT" // bound of joining a job, a positive Go duration
	Links       = "XPU_LINKS"        // auto, tcp or shm: the links between ranks of one node
	Node        = "XPU_NODE"         // a node name beside the machine: ranks of different nodes share no memory
	ShmRing     = "XPU_SHM_RING"     // the size of each ring of a shared-memory link
	ShmSpin     = "XPU_SHM_SPIN"     // how long a waiter polls a shared-memory link before it sleeps
	TCPSpin     = "XPU_TCP_SPIN"     // how long a waiter polls a TCP link before it blocks
	TCPTimeout  = "XPU_TCP_TIMEOUT"  // how long a silent peer takes to be declared lost
	RDMADevice  = "XPU_RDMA_DEVICE"  // the RDMA device rdma uses
	RDMAAddr    = "XPU_RDMA_ADDR"    // the address rdma's connection manager binds
	RDMATimeout = "XPU_RDMA_TIMEOUT" // how long a silent rdma peer takes to be declared lost
)

// Getenv reads one variable; os.Getenv is one.
type Getenv func(string) string

// OS reads the process's environment.
var OS Getenv = os.Getenv

// Launcher is how one launcher names a process's place in its job.
type Launcher struct {
	Name      string // "xpu", "open-mpi", "pmix", "pmi", "slurm"
	Rank      string // the variable holding the rank
	Size      string // the variable holding the number of ranks
	LocalSize string // the number of ranks on this host, "" when the launcher sets none
	// JobIDs are the variables whose values, those that are set, together
	// name the job (the Slurm job and its step): the same in every rank of
	// the job, different in a job started beside it. JobPort derives a
	// port per job from them. None for xpu, which sets the port itself.
	JobIDs []string
}

// Launchers lists the launchers in the order they are tried: xpu's own
// first, so `xpu run` under an outer launcher wins; then Open MPI, PMIx,
// PMI (MPICH's hydra, Intel MPI) and Slurm.
var Launchers = []Launcher{
	{Name: "xpu", Rank: Rank, Size: WorldSize, LocalSize: LocalSize},
	{Name: "open-mpi", Rank: "OMPI_COMM_WORLD_RANK", Size: "OMPI_COMM_WORLD_SIZE",
		LocalSize: "OMPI_COMM_WORLD_LOCAL_SIZE",
		JobIDs:    []string{"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE"}},
	{Name: "pmix", Rank: "PMIX_RANK", Size: "PMIX_SIZE", JobIDs: []string{"PMIX_NAMESPACE"}},
	{Name: "pmi", Rank: "PMI_RANK", Size: "PMI_SIZE", LocalSize: "MPI_LOCALNRANKS", JobIDs: []string{"PMI_KVSNAME"}},
	{Name: "slurm", Rank: "SLURM_PROCID", Size: "SLURM_NTASKS", LocalSize: "SLURM_NTASKS_PER_NODE",
		JobIDs: []string{"SLURM_JOB_ID", "SLURM_STEP_ID"}},
}

// Place is a process's place in a job, as its launcher gave it.
type Place struct {
	Launcher string // the Launcher's Name
	Rank     int    // in [0, Size)
	Size     int    // at least 1
}

// Find returns the place the first launcher that set both its rank and its
// size variables gives, ok false when none did. A launcher whose variables
// are set but do not describe a rank of a job (not integers, a rank outside
// [0, size)) is an error matching xerr.ErrInvalidArgument that names them:
// a job described wrongly is never taken for no job.
func Find(env Getenv) (p Place, ok bool, err error) {
	for _, l := range Launchers {
		rs, ss := strings.TrimSpace(env(l.Rank)), strings.TrimSpace(env(l.Size))
		if rs == "" || ss == "" {
			continue
		}
		r, err1 := strconv.Atoi(rs)
		s, err2 := strconv.Atoi(ss)
		if err1 != nil || err2 != nil || s < 1 || r < 0 || r >= s {
			return Place{}, false, xerr.Errorf("env", l.Name, xerr.ErrInvalidArgument,
				"%s=%q and %s=%q are not a rank of a job of at least one rank", l.Rank, rs, l.Size, ss)
		}
		return Place{Launcher: l.Name, Rank: r, Size: s}, true, nil
	}
	return Place{}, false, nil
}

// InJob reports whether a launcher set both its rank and size variables.
func InJob(env Getenv) bool {
	for _, l := range Launchers {
		if env(l.Rank) != "" && env(l.Size) != "" {
			return true
		}
	}
	return false
}

// AllLocal reports whether the launcher says all size ranks run on this
// host: a job of one rank, a launcher's local size equal to size, or a
// Slurm allocation of one node.
func AllLocal(env Getenv, size int) bool {
	if size == 1 {
		return true
	}
	for _, l := range Launchers {
		if l.LocalSize == "" {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(env(l.LocalSize))); err == nil && n == size {
			return true
		}
	}
	return env("SLURM_NNODES") == "1"
}

// JobID returns an identity of the job that its ranks share, or "" when no
// launcher gives one. Slurm's names the job and the step.
func JobID(env Getenv) string {
	if j := env("SLURM_JOB_ID"); j != "" {
		return "slurm " + j + "." + env("SLURM_STEP_ID")
	}
	for _, v := range []string{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_KVSNAME"} {
		if j := env(v); j != "" {
			return v + " " + j
		}
	}
	return ""
}

// String describes p for messages: "rank 2 of 4 (open-mpi)".
func (p Place) String() string {
	return fmt.Sprintf("rank %d of %d (%s)", p.Rank, p.Size, p.Launcher)
}

// Map returns a Getenv over m, for tests.
func Map(m map[string]string) Getenv { return func(k string) string { return m[k] } }

// Spin reads the spin setting name (a Go duration, at most max) through
// env, by the one rule of every spin setting: unset gives 0 (the
// transport's default), and zero or a negative duration gives -1 (never
// spin). Anything else is an error matching xerr.ErrInvalidArgument.
func Spin(env Getenv, name string, max time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(env(name))
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d > max {
		return 0, xerr.Detail(xerr.ErrInvalidArgument, "%s=%q is not a duration up to %v", name, v, max)
	}
	if d <= 0 {
		return -1, nil
	}
	return d, nil
}

// slurmSteps are the variables srun sets in each task of a job step; one
// of them set says the Slurm variables describe a rank of a step.
var slurmSteps = []string{"SLURM_STEP_ID", "SLURM_STEPID"}

// MultiRank returns the place Find gives when it is a rank of a job of
// more than one rank, ok false otherwise, and Find's error. Slurm's
// variables count only inside a job step (SLURM_STEP_ID set, as srun sets
// it): a batch script, which runs in no step, has SLURM_PROCID=0 and the
// allocation's SLURM_NTASKS too, and a program it starts directly is no
// rank of anything. xpu.OpenDefault asks it whether it needs a
// communicator.
func MultiRank(env Getenv) (p Place, ok bool, err error) {
	p, ok, err = Find(env)
	if err != nil || !ok || p.Size < 2 {
		return Place{}, false, err
	}
	if p.Launcher == "slurm" && !slices.ContainsFunc(slurmSteps, func(v string) bool { return env(v) != "" }) {
		return Place{}, false, nil
	}
	return p, true, nil
}
