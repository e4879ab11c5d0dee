package mpi_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain is in mpi_main_test.go for builds with MPI, where a process
// launched by mpirun runs as one rank.
func TestMain(m *testing.M) { testMain(m) }

// verify runs the tests and checks for leaked goroutines.
func verify(m *testing.M) { goleak.VerifyTestMain(m) }
