// Package tooling holds the project's developer tooling; tooling, not
// shipped by the library. Nothing here is imported by the library's own
// code: the benchmarks, the chaos runner, the RDMA guest harness and the
// helpers of tests live below it, so that the rest of internal/ holds only
// what the library ships. It stays inside internal/ so that cmd/xpu can
// import the benchmark engine for `xpu bench`.
//
// Its folders:
//
//   - bench: the benchmark engine that `xpu bench` and the packages'
//     go test -bench wrappers share; bench/ref holds the C references
//     (make refs, refs-mpi, refs-shm), bench/sweep the size sweeps of
//     `xpu bench sweep` (make sweep) and bench/units the scaled figures
//     the reports print.
//   - tcpbench, rdmabench, mpibench: benchmark programs run as one process
//     per rank (make refs-tcp, refs-shm, bench-mpi, bench-rdma).
//   - chaos: the chaos test of the procs backend and of xpu run's launcher;
//     chaos/cmd/chaos is its command (make chaos).
//   - rdmavm: the qemu guest with soft-RoCE in which the rdma backend's
//     tests and make bench-rdma run on real kernel verbs.
//   - commtest, jointest: helpers that tests share.
//
// The package itself is empty but for tests. TestLayout keeps the rule:
// no package of internal/ outside internal/tooling imports a backend,
// no package of the library outside cmd/ imports internal/tooling but from
// its tests, and every package below internal/tooling says in the first
// line of its documentation that it is tooling. The TestDocs tests keep
// the docs' links and lists true; TestGuide builds and runs every
// program of docs/guide.md and compares what it prints with the guide; and
// TestGoDocLeadsWithEntryPoints and TestBackendOptionsDocumentedOneWay keep
// the package documentation written for users: entry points first, no
// internal names, every backend's options documented one way.
package tooling
