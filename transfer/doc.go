// Package transfer moves data between memory spaces: CopyBlock between any
// two spaces that have a path, a stream-ordered form that returns an event,
// and the typed Copy[T] on buffers.
//
// Copies between host-accessible spaces always have a path: the built-in
// Host, a memmove on the calling goroutine. A pair with no path is an error
// matching ErrNotSupported that names both spaces.
//
// # For backends
//
// A backend registers paths for a pair of space kinds
// (memspace.Properties.Kind), so a GPU backend adds "host"->"cuda-device"
// and its reverse. Register returns the function that removes exactly that
// registration, so a backend registers paths bound to what it opened in
// Open and removes them in Close. A pair registered again is served by the
// newest registration still in force. A registered path takes precedence
// over Host.
//
// ParallelHost returns a host path that splits large copies across the
// workers of an executor. Each open cpu backend registers one over its own
// executor for "host"->"host"; with none open, Host serves.
//
// Everything in the package is safe for concurrent use.
package transfer
