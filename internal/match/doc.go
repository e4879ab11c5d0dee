// Package match is the matching engine of the communicators that move
// their own messages (backends/local and backends/procs): one rank's posted
// receives and unexpected messages, matched by source and tag with MPI's
// rules.
//
// A Table holds two kinds of entry, both embedding Entry:
//   - posted receives, each for one source or comm.AnySource, and one tag
//     or comm.AnyTag;
//   - unexpected messages: arrived (or announced) before a receive wanted
//     them, each from one source with one tag.
//
// An arriving message from src with tag goes to the receive posted first
// among those it matches (TakePosted): the first match among the receives
// for src and the first among the AnySource receives, whichever was posted
// earlier. A posted receive takes the message that arrived first among
// those it matches (TakeUnexpected). Together these keep MPI's
// non-overtaking order: two messages from one sender that one receive
// matches are received in the order they were sent. comm.AnyTag never
// matches the reserved tags of the collectives (impl.MatchTag).
//
// A Table does no locking: its owner guards it, as it guards the state it
// changes in the same critical sections. Entries are linked in place, so
// posting, matching and removing allocate nothing.
package match
