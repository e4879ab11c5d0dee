// Package testwait bounds the waits of tests; tooling, not shipped by the
// library. A test that waits for a channel, a sync.WaitGroup or a blocking
// call through it fails within Bound, naming what it waited for and
// showing the stacks of the test binary's goroutines, where an unbounded
// wait whose wake-up is lost would hang until go test's timeout and name
// nothing.
//
//   - Recv and Closed wait for a channel, Group for a sync.WaitGroup;
//   - Ctx returns a context that ends after Bound or when the test ends,
//     for the blocking calls of a test and of its goroutines;
//   - Call runs a blocking call with such a context, and fails the test
//     also when the call ignores its context and does not return.
//
// Recv, Closed, Group and Call stop the test with FailNow: they run on the
// test's own goroutine. Ctx may be used on any goroutine.
//
// It is for tests: its helpers take a testing.TB.
package testwait
