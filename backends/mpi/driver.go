package mpi

import (
	"strconv"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/internal/jobenv"
)

func init() { xpu.Register(Name, driver{}) }

// driver opens this process's rank of the MPI job. Built without the mpi
// tag it reports xpu.ErrUnavailable (stub.go); with it, see driver_mpi.go.
//
// Its one option is OptThreadLevel ("multiple" or "serialized"); Open
// refuses any other key that is not scoped to another backend, in both
// builds.
type driver struct{}

// Launched reports the rank and size that an MPI launcher gave this process
// through its environment — mpirun or mpiexec of Open MPI or MPICH, a PMIx
// or PMI launcher, or Slurm's srun — and the launcher's kind, as package
// jobenv names it: "open-mpi", "pmix", "pmi" (MPICH's Hydra, Intel MPI) or
// "slurm", tried in that order. ok is false when none did, and Open then
// makes a one-rank job (an MPI singleton). The variables of `xpu run`
// (XPU_RANK, XPU_WORLD_SIZE) do not count: the ranks it starts itself are
// each a singleton to MPI (it hands jobs of this backend to mpirun). Nor do
// launcher variables that are set but do not describe a rank of a job (not
// integers, a rank outside [0, size)): ok is then false too, and the
// driver's Info says what is wrong with them. Launched reads only the
// environment, so it is cheap and works before MPI is initialised and in
// builds without MPI.
func Launched() (rank, size int, kind string, ok bool) {
	p, ok, err := launchPlace()
	if !ok || err != nil {
		return 0, 0, "", false
	}
	return p.Rank, p.Size, p.Launcher, true
}

// launchPlace is the place an MPI launcher gave this process (see
// Launched), or the error of its malformed variables.
func launchPlace() (jobenv.Place, bool, error) {
	return jobenv.Find(mpiEnv)
}

// mpiEnv reads the environment as MPI sees it: without the rank and size
// of `xpu run`.
func mpiEnv(key string) string {
	if key == jobenv.Rank || key == jobenv.WorldSize {
		return ""
	}
	return jobenv.OS(key)
}

// launchText describes how the process was launched, for Info.
func launchText(rank, size int, fromMPI bool) string {
	if fromMPI {
		return "rank " + strconv.Itoa(rank) + " of " + strconv.Itoa(size) + " (from MPI)"
	}
	p, ok, err := launchPlace()
	switch {
	case err != nil:
		return "launcher variables not understood: " + err.Error()
	case ok:
		return "launched by " + p.Launcher + " as rank " + strconv.Itoa(p.Rank) + " of " + strconv.Itoa(p.Size)
	}
	return "not launched by mpirun: Open makes a one-rank job"
}
