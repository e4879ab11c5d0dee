// Package jobenv is the one place that knows how a job tells a process its
// place through the environment: the XPU_* variables `xpu run` sets, and the
// variables of the launchers xpu understands besides (Open MPI's mpirun,
// PMIx, PMI launchers such as MPICH's hydra, and Slurm's srun).
//
// The launcher (internal/launch), the registry (XPU_BACKEND), the TCP
// communicator (which joins the job the environment names) and the MPI
// backend (which reports how it was launched) all read it here, so that
// they agree on which launchers exist and in which order they are tried.
//
// Every function reads the environment through a Getenv, so tests pass a
// map and nothing here changes the process.
package jobenv
