// Package impl holds what backend implementers need and users of xpu do
// not: the argument checks every communicator and memory space makes in the
// same words, tag matching with the reserved tags of the collectives, and
// the reduction kernel of the shared algorithms (ReduceBytes), for a
// backend that reduces on the host in its own collectives.
// It stands to the concept packages as database/sql/driver stands to
// database/sql: a user's `go doc comm` shows the API to call, and a backend
// author imports impl as well.
//
// Every check returns nil or an error matching xerr.ErrInvalidArgument whose
// message is the detail alone ("rank 5 outside [0, 4)"); the caller wraps it
// in its *xerr.Error (xerr.Op), which names the backend and the operation.
//
// Options are read with xpu.Options.Reader, capabilities named with the
// xpu.Cap constants and derived with xpu.CapabilitiesOf, and errors built
// with package xerr; docs/backend-guide.md shows all of them together.
package impl
