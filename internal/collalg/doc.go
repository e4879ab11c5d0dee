// Package collalg is how the shared collective algorithms of package comm
// are chosen: the size thresholds at which they switch, the choice itself,
// and the sizes that lead a call down every path. Package comm dispatches
// with Choose, and the conformance suite tries the sizes of Counts, so a
// threshold that moves moves the sizes the suite tries with it, and an
// algorithm added to Choose without a size that reaches it fails this
// package's tests.
//
// The thresholds are constants: the tests of package comm force an
// algorithm by calling it directly, and shrink the ring's chunk through a
// variable of comm's own (comm.SetRingChunk) that starts at RingChunk.
package collalg
