//go:build mpi && !mpich

package mpi

// Open MPI: mpi.h and libmpi through pkg-config (libopenmpi-dev on Debian).
// Another installation is found by pointing PKG_CONFIG_PATH at its ompi-c.pc.

// #cgo pkg-config: ompi-c
import "C"
