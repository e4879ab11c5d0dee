// Package onesided is the core of one-sided communication (comm.OneSided)
// that the communicators share: the table of a rank's exposed regions, the
// keys that name them to the other ranks, and the check of a key and a
// range against the region it names, made by whichever side serves the
// transfer (the origin's goroutine in one process, the target's link
// reader between processes).
//
// A key carries the rank, the region's address and length, and a number:
// a random epoch of the table in its upper half (so a key of another
// communicator names nothing here) and the region's sequence number in its
// lower half. A key matches only the open region it was made for, in every
// field. A region counts the copies under way into or out of it, and its
// Close waits for them, so that no byte moves once Close has returned.
package onesided
