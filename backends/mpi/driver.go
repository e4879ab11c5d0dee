package mpi

import (
	"os"
	"strconv"

	"github.com/xpu-go/xpu"
)

func init() { xpu.Register(Name, driver{}) }

// driver opens this process's rank of the MPI job. Built without the mpi
// tag it reports xpu.ErrUnavailable (stub.go); with it, see driver_mpi.go.
type driver struct{}

// capabilities common to every build with MPI.
var baseCapabilities = []string{"p2p", "anysource", "anytag", "cancel.recv", "collectives.native",
	"collectives.nonblocking", "inplace", "split", "dup"}

// Launched reports the rank and size that an MPI launcher (mpirun or
// mpiexec of Open MPI or MPICH, or Slurm's srun) gave this process through
// its environment, and the launcher's kind ("open-mpi", "hydra", "slurm",
// "pmix"); ok is false when none did, and Open then makes a one-rank job
// (an MPI singleton). It reads only the environment, so it is cheap and
// works before MPI is initialised and in builds without MPI.
func Launched() (rank, size int, kind string, ok bool) {
	try := func(k, rk, sk string) bool {
		r, err1 := strconv.Atoi(os.Getenv(rk))
		s, err2 := strconv.Atoi(os.Getenv(sk))
		if err1 != nil || err2 != nil || s <= 0 || r < 0 || r >= s {
			return false
		}
		rank, size, kind, ok = r, s, k, true
		return true
	}
	if try("open-mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE") ||
		try("hydra", "PMI_RANK", "PMI_SIZE") ||
		try("pmix", "PMIX_RANK", "PMIX_SIZE") ||
		try("slurm", "SLURM_PROCID", "SLURM_NTASKS") {
		return rank, size, kind, ok
	}
	return 0, 0, "", false
}

// launchText describes how the process was launched, for Info.
func launchText(rank, size int, fromMPI bool) string {
	if fromMPI {
		return "rank " + strconv.Itoa(rank) + " of " + strconv.Itoa(size) + " (from MPI)"
	}
	if r, s, k, ok := Launched(); ok {
		return "launched by " + k + " as rank " + strconv.Itoa(r) + " of " + strconv.Itoa(s)
	}
	return "not launched by mpirun: Open makes a one-rank job"
}
