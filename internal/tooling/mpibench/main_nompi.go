//go:build !mpi

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "mpibench: built without MPI support: rebuild with -tags mpi")
	os.Exit(1)
}
