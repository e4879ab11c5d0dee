// Package transfer moves data between memory spaces: CopyBlock between any
// two spaces that have a path, a stream-ordered form that returns an event,
// and the typed Copy[T] on buffers.
//
// Paths are registered by a backend for a pair of space kinds
// (memspace.Properties.Kind), so a GPU backend adds "host"->"cuda-device"
// and its reverse; copies between host-accessible spaces always have the
// built-in memmove path, which a backend may replace (ParallelHost splits
// large copies across workers). A pair with no path is an error matching
// ErrNotSupported that names both spaces.
package transfer
