// Package p2p is the point-to-point core that the communicators share
// (local, tcp, rdma): the life cycle of a request — its outcome recorded
// once, by whoever completes it, and waited for with a context, with a
// channel made only when a goroutine blocks (Done) — the status of a send
// and the outcome of a receive, truncation included (SendStatus, Outcome),
// an eager send to the sending rank itself (Self), and the eager options
// (Read). Matching itself is package internal/match.
package p2p
