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
// OpenDefault reads XPU_BACKEND, an ordered fallback chain such as
// "cuda,cpu", and reports why each skipped candidate was skipped. Describe
// answers availability, devices, concepts, capabilities and element types
// without opening a backend.
package xpu
