// Package ccall calls the CUDA driver straight from C, for the benchmarks
// of package cu (bench_test.go): a loop of calls in one crossing into C,
// the floor a binding is measured against, and a context switch and a call
// made as two crossings, the alternative to cu's one. It loads the library
// itself with dlopen, which hands back the instance cu loaded when the
// path is the same. Without cgo the package is empty.
package ccall
