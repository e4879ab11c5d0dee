// Package xpu lets Go programs use any accelerator and interconnect through
// four small concepts — memory spaces (package memspace), executors
// (executor), communicators (comm) and transfers (transfer) — composed per
// backend into a Backend, chosen by name at run time, and proven correct by
// the exported conformance suite (package conformance).
//
// Backends register a Driver under a name in an init function, as
// database/sql drivers do, and are selected with a blank import:
//
//	import _ "github.com/xpu-go/xpu/backends/cpu"
//
//	b, err := xpu.Open(ctx, "cpu", nil)
//
// Open takes a chain where it takes a name ("cuda,cpu": the first that
// opens). OpenDefault reads XPU_BACKEND, such a chain; when it is unset,
// a rank of a job of several ranks (started by `xpu run`, mpirun or srun)
// gets the backends with a communicator that the program links, and any
// other process DefaultChain. Both record on the Backend its Selection:
// the chain, why, the backend chosen and why each candidate before it was
// skipped, to print. A name that is no backend at all is an error that
// lists the known ones, and a typo in XPU_BACKEND never falls back; a
// backend of this module that the program does not link is skipped with
// the import that links it. Describe answers availability, devices,
// concepts, capabilities and element types without opening a backend.
package xpu
