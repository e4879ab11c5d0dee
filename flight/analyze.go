package flight

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Analyze reads the dumps of the ranks of one job and says, in a few
// lines, why it stopped: collectives the ranks called in different orders
// or with different arguments, ranks that never entered a collective the
// others wait in, messages sent that no receive matched, and which ranks
// wait where and since when. Dumps of several communicators (Dump.Comm)
// are analysed apart. An empty result means the records show nothing
// pending and nothing mismatched.
func Analyze(dumps []Dump) []string {
	byComm := map[string][]Dump{}
	var comms []string
	for _, d := range dumps {
		if _, ok := byComm[d.Comm]; !ok {
			comms = append(comms, d.Comm)
		}
		byComm[d.Comm] = append(byComm[d.Comm], d)
	}
	sort.Strings(comms)
	var out []string
	for _, c := range comms {
		a := newGroup(byComm[c])
		lines := a.analyze()
		if len(comms) > 1 && len(lines) > 0 {
			name := c
			if name == "" {
				name = "world"
			}
			out = append(out, "communicator "+name+":")
			for i := range lines {
				lines[i] = "  " + lines[i]
			}
		}
		out = append(out, lines...)
	}
	return out
}

// group is the records of the ranks of one communicator.
type group struct {
	size    int
	ranks   map[int]*rankRec
	missing []int
}

type rankRec struct {
	rank      int
	at        time.Time // when it was dumped
	reason    string
	truncated bool
	entries   []Entry
}

func newGroup(dumps []Dump) *group {
	g := &group{ranks: map[int]*rankRec{}}
	for _, d := range dumps {
		g.size = max(g.size, d.Size)
		r := &rankRec{rank: d.Rank, at: d.Time, reason: d.Reason, truncated: d.Dropped > 0}
		for _, j := range d.Entries {
			r.entries = append(r.entries, j.entry())
		}
		g.ranks[d.Rank] = r
	}
	for i := range g.size {
		if g.ranks[i] == nil {
			g.missing = append(g.missing, i)
		}
	}
	return g
}

// sorted returns the ranks that have a record, in order.
func (g *group) sorted() []*rankRec {
	out := make([]*rankRec, 0, len(g.ranks))
	for i := range g.size {
		if r := g.ranks[i]; r != nil {
			out = append(out, r)
		}
	}
	return out
}

func (g *group) analyze() []string {
	var out []string
	if len(g.missing) > 0 {
		out = append(out, fmt.Sprintf("no record from %s (it ended before it could write one, or was not asked to)",
			rankList(g.missing)))
	}
	out = append(out, g.mismatched()...)
	out = append(out, g.neverEntered()...)
	out = append(out, g.unmatched()...)
	out = append(out, g.waits()...)
	return out
}

// signature is what every rank must agree on in a collective.
func signature(e Entry) string {
	return describe(e)
}

// mismatched reports the first sequence number at which the ranks'
// collectives differ: the later ones follow from it.
func (g *group) mismatched() []string {
	bySeq := map[uint64]map[string][]int{}
	for _, r := range g.sorted() {
		for _, e := range r.entries {
			if e.Seq == 0 {
				continue
			}
			m := bySeq[e.Seq]
			if m == nil {
				m = map[string][]int{}
				bySeq[e.Seq] = m
			}
			s := signature(e)
			m[s] = append(m[s], r.rank)
		}
	}
	seqs := make([]uint64, 0, len(bySeq))
	for s, m := range bySeq {
		if len(m) > 1 {
			seqs = append(seqs, s)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	m := bySeq[seqs[0]]
	sigs := make([]string, 0, len(m))
	for s := range m {
		sigs = append(sigs, s)
	}
	// The largest party first, then by first rank.
	sort.Slice(sigs, func(i, j int) bool {
		a, b := m[sigs[i]], m[sigs[j]]
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return a[0] < b[0]
	})
	parts := make([]string, len(sigs))
	for i, s := range sigs {
		parts[i] = rankList(m[s]) + " in " + s
	}
	return []string{fmt.Sprintf("mismatched collectives at #%d: %s", seqs[0], strings.Join(parts, "; "))}
}

// neverEntered reports, for the collective ranks wait in, the ranks that
// have not entered it.
func (g *group) neverEntered() []string {
	type waiting struct {
		e     Entry
		ranks []int
		since time.Duration
	}
	bySeq := map[uint64]*waiting{}
	lastSeq := map[int]Entry{}
	for _, r := range g.sorted() {
		for _, e := range r.entries {
			if e.Seq == 0 {
				continue
			}
			if e.Seq > lastSeq[r.rank].Seq {
				lastSeq[r.rank] = e
			}
			if e.State.Pending() {
				w := bySeq[e.Seq]
				if w == nil {
					w = &waiting{e: e}
					bySeq[e.Seq] = w
				}
				w.ranks = append(w.ranks, r.rank)
				w.since = max(w.since, r.at.Sub(e.Posted))
			}
		}
	}
	seqs := make([]uint64, 0, len(bySeq))
	for s := range bySeq {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var out []string
	for _, s := range seqs {
		w := bySeq[s]
		for _, r := range g.sorted() {
			last, ok := lastSeq[r.rank]
			if ok && last.Seq >= s {
				continue
			}
			line := fmt.Sprintf("rank %d never entered %s, which %s %s in for %s", r.rank, describe(w.e),
				rankList(w.ranks), plural(len(w.ranks), "waits", "wait"), dur(w.since))
			if ok {
				line += fmt.Sprintf("; its last collective was %s (%s)", describe(last), last.State)
			} else {
				line += "; its record has no collective"
			}
			if p := r.oldestPending(); p != nil {
				line += fmt.Sprintf("; it waits in %s for %s", describe(*p), dur(r.at.Sub(p.Posted)))
			}
			out = append(out, line)
		}
	}
	return out
}

// oldestPending is the rank's oldest operation still pending.
func (r *rankRec) oldestPending() *Entry {
	for i := range r.entries {
		if r.entries[i].State.Pending() {
			return &r.entries[i]
		}
	}
	return nil
}

// unmatched reports receives that wait while their peer sent the rank
// messages with other tags that nothing received, and sends that wait for
// a receive their peer never posted.
func (g *group) unmatched() []string {
	var out []string
	for _, r := range g.sorted() {
		for _, e := range r.entries {
			if !e.State.Pending() {
				continue
			}
			switch e.Op {
			case OpRecv:
				out = append(out, g.recvLines(r, e)...)
			case OpSend:
				if line := g.sendLine(r, e); line != "" {
					out = append(out, line)
				}
			}
		}
	}
	return out
}

// surplus counts, by tag, the messages src's record shows it sent to dst
// beyond those dst's record shows it received from src (by tag, then with
// wildcards).
func (g *group) surplus(src, dst *rankRec) map[int]int {
	sent := map[int]int{}
	for _, e := range src.entries {
		if e.Op == OpSend && e.Peer == dst.rank && e.State != Cancelled && e.State != Failed {
			sent[e.Tag]++
		}
	}
	wild := 0
	for _, e := range dst.entries {
		if e.Op != OpRecv || (e.State != Done && e.State != Matched) {
			continue
		}
		switch {
		case e.Peer == src.rank && e.Tag != AnyTag:
			if sent[e.Tag] > 0 {
				sent[e.Tag]--
			}
		case e.Peer == src.rank || e.Peer == AnyPeer:
			wild++
		}
	}
	tags := make([]int, 0, len(sent))
	for t := range sent {
		tags = append(tags, t)
	}
	sort.Ints(tags)
	for _, t := range tags {
		for wild > 0 && sent[t] > 0 {
			sent[t]--
			wild--
		}
		if sent[t] == 0 {
			delete(sent, t)
		}
	}
	return sent
}

func (g *group) recvLines(r *rankRec, e Entry) []string {
	var out []string
	srcs := []int{e.Peer}
	if e.Peer == AnyPeer {
		srcs = srcs[:0]
		for _, o := range g.sorted() {
			if o.rank != r.rank {
				srcs = append(srcs, o.rank)
			}
		}
	}
	head := fmt.Sprintf("rank %d waits in %s for %s", r.rank, describe(e), dur(r.at.Sub(e.Posted)))
	var found []string
	for _, s := range srcs {
		src := g.ranks[s]
		if src == nil {
			continue
		}
		sur := g.surplus(src, r)
		var other []string
		for t, n := range sur {
			if e.Tag == AnyTag || t == e.Tag {
				continue // it would have matched
			}
			other = append(other, fmt.Sprintf("tag %d (%d %s)", t, n, plural(n, "message", "messages")))
		}
		sort.Strings(other)
		if len(other) > 0 {
			found = append(found, fmt.Sprintf("rank %d sent %s to rank %d, unmatched", s, strings.Join(other, ", "), r.rank))
		}
	}
	if len(found) > 0 {
		line := head + "; " + strings.Join(found, "; ")
		if r.truncated {
			line += " (the receiver's record is truncated: older receives are not counted)"
		}
		out = append(out, line)
	}
	return out
}

func (g *group) sendLine(r *rankRec, e Entry) string {
	dst := g.ranks[e.Peer]
	if dst == nil {
		return ""
	}
	for _, d := range dst.entries {
		if d.Op == OpRecv && d.State.Pending() && (d.Peer == r.rank || d.Peer == AnyPeer) &&
			(d.Tag == e.Tag || d.Tag == AnyTag) {
			return "" // posted: the bytes are moving
		}
	}
	line := fmt.Sprintf("rank %d waits in %s for %s; rank %d has no receive posted for it", r.rank, describe(e),
		dur(r.at.Sub(e.Posted)), dst.rank)
	if p := dst.oldestPending(); p != nil {
		line += fmt.Sprintf(" (it waits in %s)", describe(*p))
	}
	return line
}

// waits lists what each rank waits in, oldest first.
func (g *group) waits() []string {
	var out []string
	for _, r := range g.sorted() {
		var pend []string
		for _, e := range r.entries {
			if e.State.Pending() {
				pend = append(pend, fmt.Sprintf("%s for %s", describe(e), dur(r.at.Sub(e.Posted))))
			}
		}
		switch {
		case len(pend) > 3:
			pend = append(pend[:3], fmt.Sprintf("and %d more", len(pend)-3))
			fallthrough
		case len(pend) > 0:
			out = append(out, fmt.Sprintf("rank %d waits in %s", r.rank, strings.Join(pend, ", ")))
		case len(r.entries) > 0:
			last := r.entries[len(r.entries)-1]
			out = append(out, fmt.Sprintf("rank %d waits in no operation of this communicator; its last, %s, %s %s ago",
				r.rank, describe(last), last.State, dur(r.at.Sub(endOf(last)))))
		default:
			out = append(out, fmt.Sprintf("rank %d recorded no operation", r.rank))
		}
	}
	return out
}

func endOf(e Entry) time.Time {
	if e.Ended.IsZero() {
		return e.Posted
	}
	return e.Ended
}

// describe writes an operation as the user called it: "Recv(src 0, tag
// 7, 8 bytes)", "Allreduce #41 (float64 × 1024, sum)".
func describe(e Entry) string {
	switch {
	case e.Op.Collective():
		var args []string
		if e.Op.HasRoot() {
			args = append(args, "root "+strconv.Itoa(e.Peer))
		}
		if e.Op != OpBarrier {
			args = append(args, fmt.Sprintf("%s × %d", e.DType, e.Count))
		}
		if e.Reduction != "" {
			args = append(args, e.Reduction)
		}
		s := fmt.Sprintf("%s #%d", e.Op, e.Seq)
		if len(args) > 0 {
			s += " (" + strings.Join(args, ", ") + ")"
		}
		return s
	case e.Op == OpRecv:
		return fmt.Sprintf("Recv(src %s, tag %s, %d bytes)", peerOrAny(e.Peer), tagOrAny(e.Tag), e.Count)
	case e.Op == OpSend:
		return fmt.Sprintf("Send(dst %d, tag %d, %d bytes)", e.Peer, e.Tag, e.Count)
	case e.Op == OpFlush:
		return fmt.Sprintf("Flush(%s)", peerOrAll(e.Peer))
	default:
		return fmt.Sprintf("%s(rank %d, %d bytes)", e.Op, e.Peer, e.Count)
	}
}

func peerOrAny(p int) string {
	if p == AnyPeer {
		return "any"
	}
	return strconv.Itoa(p)
}

func peerOrAll(p int) string {
	if p == AnyPeer {
		return "all ranks"
	}
	return "rank " + strconv.Itoa(p)
}

func tagOrAny(t int) string {
	if t == AnyTag {
		return "any"
	}
	return strconv.Itoa(t)
}

// dur writes a wait's length to a tenth of a second, or to the
// millisecond below a second.
func dur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func rankList(ranks []int) string {
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(s, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
