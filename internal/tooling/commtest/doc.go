// Package commtest is a helper of tests; tooling, not shipped by the
// library. It holds the helpers that the tests of package comm and of
// the communicator backends (backends/local, backends/mpi) share: viewing
// Go slices as buffers and blocks, waiting for a request under a time
// limit, opening a group of ranks that is closed when the test ends, and
// making an element of any numeric type from small integers.
//
// It is for tests only: it imports testing and testify, and no package
// outside a _test.go file may import it (TestImportedOnlyByTests checks the module).
// Because it imports comm, the in-package tests of comm (package comm)
// cannot import it without a cycle; the external ones (package comm_test)
// can.
//
// A helper that may fail the test says which goroutine it may run on:
// Block reports with Errorf and may run on any goroutine; the others stop
// the test with FailNow and run on the test's own goroutine.
package commtest
