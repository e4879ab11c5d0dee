//go:build mpi && mpich

package mpi

// MPICH: mpi.h and libmpich through pkg-config (libmpich-dev on Debian),
// chosen with the build tags "mpi mpich".

// #cgo pkg-config: mpich
import "C"
