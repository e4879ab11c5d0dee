// Package tcp is the former name of package procs, the multi-process
// backend: one process per rank, each pair of ranks linked through shared
// memory when they share a machine and through TCP otherwise.
//
// Deprecated: import github.com/xpu-go/xpu/backends/procs. The backend is
// registered as "procs"; "tcp" stays an alias of it (xpu.Open(ctx, "tcp",
// …), XPU_BACKEND=tcp and options scoped "tcp." work as before), and every
// name of this package forwards to procs, for at least one release.
// Importing this package registers procs.
package tcp
