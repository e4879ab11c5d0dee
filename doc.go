// Package xpu lets Go programs use any accelerator and interconnect through
// four small concepts — memory spaces (package memspace), executors
// (executor), communicators (comm) and transfers (transfer) — composed per
// backend into a Backend, chosen by name at run time. A program calls Open
// with a backend's name, or OpenDefault to let XPU_BACKEND choose, and uses
// the Backend's components:
//
//	import _ "github.com/xpu-go/xpu/backends/cpu" // links the "cpu" backend
//
//	b, err := xpu.Open(ctx, "cpu", nil) // or "cuda,cpu": the first that opens
//	defer b.Close()
//	buf, err := memspace.Alloc[float32](b.Memory, 1024)
//	par, ok := executor.As[executor.Parallel](b.Exec)
//
// The guide (docs/guide.md in the repository) walks the whole path:
// spaces, parallel loops, streams, transfers, jobs of several processes,
// errors.
//
// # Choosing a backend
//
// Open takes a chain where it takes a name ("cuda,cpu": the first that
// opens). OpenDefault reads XPU_BACKEND (EnvBackend), such a chain; when it
// is unset, a rank of a job of several ranks (started by `xpu run`, mpirun
// or srun) gets the backends with a communicator that the program links,
// and any other process DefaultChain. Both record on the Backend its
// Selection: the chain, why, the backend chosen and why each candidate
// before it was skipped, to print. A name that is no backend at all is an
// error matching ErrUnknownBackend that lists the known ones, and a typo in
// XPU_BACKEND never falls back; a backend of this module that the program
// does not link is skipped with the import that links it. Options pass a
// backend its settings, as strings; each backend documents its keys.
//
// Describe and DescribeAll answer availability, devices, concepts,
// capabilities (the Cap constants) and element types without opening a
// backend; `xpu info` prints them.
//
// # Writing a backend
//
// A backend registers a Driver under a name in an init function, as
// database/sql drivers do (Register, RegisterAlias), and is selected with a
// blank import. Its Open reads Options with an OptionReader, and its Info
// lists its capabilities with the Cap constants, the concept-level ones
// (Derived) taken from CapabilitiesOf. docs/backend-guide.md in the
// repository says what each concept must do, and package conformance proves
// it.
package xpu
