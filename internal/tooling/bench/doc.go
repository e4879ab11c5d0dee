// Package bench is the xpu bench tool's engine; tooling, not shipped by
// the library. It holds the bodies of the project's benchmarks, so that
// `go test -bench` (through thin wrappers in each package's _test files)
// and the `xpu bench` command (through testing.Benchmark) run the same
// code. Each table (CPU, Pool, …) lists Cases: a name, the body, the unit
// its figure is read in, and what it is compared with — another case of
// the same run (Baseline) or a figure of a C reference program in ref/
// (Ref), each with the ratio it should reach.
//
// The C references (the CPU ones built with `gcc -O3 -march=native
// -fopenmp`, cuda_ref with `gcc -O2 -ldl`, which loads the driver at run
// time) print one "<name> <median> <unit>" line per figure; ParseRef reads
// them.
package bench
