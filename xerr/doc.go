// Package xerr holds the error vocabulary shared by every xpu package and
// backend: sentinel errors checked with errors.Is, sub-kinds of them that
// match their parent too, and Error, which records the backend, device and
// operation that failed while keeping the cause reachable through Unwrap.
//
// Users rarely import xerr directly: each concept package re-exports the
// sentinels it documents (memspace.ErrOutOfMemory, comm.ErrTruncated, …) and
// those are the same values. Third-party backends import xerr (or the
// concept packages) to return errors that the conformance suite recognises.
package xerr
