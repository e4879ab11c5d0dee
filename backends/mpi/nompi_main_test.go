//go:build !mpi

package mpi_test

import "testing"

func testMain(m *testing.M) { verify(m) }
