package rdma_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// docs/results/rdma.md has three parts: TestGuestBench writes the first,
// everything above procsBegin; TestGuestProcsBench the second, between
// procsBegin and procsEnd; what follows procsEnd is written by hand (what
// the figures say, what was tried) and kept by both, so that make
// bench-rdma renews the figures without losing the record around them.
const (
	procsBegin = "<!-- TestGuestProcsBench writes from here (make bench-rdma) -->"
	procsEnd   = "<!-- to here; what follows is written by hand and kept by make bench-rdma -->"
)

// keepTail returns the first part of the page, head, followed by the
// parts of the page old (its text, empty when there is none) from
// procsBegin on: the figures of TestGuestProcsBench and the text kept.
// An old page without the marker keeps nothing.
func keepTail(old, head string) string {
	i := strings.Index(old, procsBegin)
	if i < 0 {
		return head
	}
	return strings.TrimRight(head, "\n") + "\n\n" + old[i:]
}

// spliceProcs returns the page old with section between procsBegin and
// procsEnd, in place of what was there. A page without both markers in
// that order gets them, and the section, at its end.
func spliceProcs(old, section string) string {
	section = "\n\n" + strings.Trim(section, "\n") + "\n\n"
	i := strings.Index(old, procsBegin)
	j := strings.Index(old, procsEnd)
	if i < 0 || j < i {
		return strings.TrimRight(old, "\n") + "\n\n" + procsBegin + section + procsEnd + "\n"
	}
	return old[:i+len(procsBegin)] + section + old[j:]
}

// readPage returns the text of the results page, empty when there is
// none yet.
func readPage(t *testing.T) string {
	b, err := os.ReadFile(resultsPage)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

func TestResultsPageParts(t *testing.T) {
	const kept = "\nWhat the figures say: by hand.\n"
	old := "# old head\n\nold figures\n\n" + procsBegin + "\n\nold procs\n\n" + procsEnd + kept

	page := keepTail(old, "# new head\n\nnew figures\n")
	require.Equal(t, "# new head\n\nnew figures\n\n"+procsBegin+"\n\nold procs\n\n"+procsEnd+kept, page,
		"the first part is replaced, the procs figures and the text by hand are kept")

	page = spliceProcs(page, "## One process per rank\n\nnew procs\n")
	require.Equal(t, "# new head\n\nnew figures\n\n"+procsBegin+"\n\n## One process per rank\n\nnew procs\n\n"+procsEnd+kept, page,
		"only the procs figures are replaced")
	require.Equal(t, page, spliceProcs(page, "## One process per rank\n\nnew procs"), "splicing the same section again changes nothing")

	// A page from before the markers, or none: the head alone, then the
	// procs figures at its end, between new markers.
	require.Equal(t, "# head\n", keepTail("# head of a page without markers\n", "# head\n"))
	require.Equal(t, "# head\n", keepTail("", "# head\n"))
	require.Equal(t, "# head\n\n"+procsBegin+"\n\nprocs\n\n"+procsEnd+"\n", spliceProcs("# head\n", "procs"))
	// Markers out of order are not trusted: the section goes to the end.
	swapped := "# head\n" + procsEnd + "\nx\n" + procsBegin + "\n"
	require.True(t, strings.HasSuffix(spliceProcs(swapped, "procs"), procsBegin+"\n\nprocs\n\n"+procsEnd+"\n"))
}

func TestResultsPageHasItsMarkers(t *testing.T) {
	page := readPage(t)
	i, j := strings.Index(page, procsBegin), strings.Index(page, procsEnd)
	require.True(t, i > 0 && j > i, "%s lacks the markers between which TestGuestProcsBench writes, in order: make bench-rdma would not keep its text by hand", resultsPage)
}

func TestProcsSection(t *testing.T) {
	figs := map[string]float64{
		"rdma.np2.pingpong.8B.p50": 38.9, "ib_send_lat.8B.t_typical": 15.4,
		"rdma.np2.bw.1MiB": 52.5, "ib_write_bw.1MiB": 66.8,
		"rdma.np2.put.4MiB": 60.9, "ib_write_bw.4MiB": 67.1,
		"rdma.np4.allreduce.64MiB": 6533, "tcp.np4.allreduce.64MiB": 4202,
		"rdma.np4.allreduce.node.64MiB": 612, "shm.np4.allreduce.64MiB": 655,
	}
	s := procsSection(figs, time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	for _, row := range []string{
		"| ping-pong 8 B, half round trip, median | 38.9 µs | ib_send_lat -s 8, t_typical: 15.4 µs | 2.53 | ≤ 1.2: **not met** |",
		"| stream 1 MiB | 52.5 MiB/s | ib_write_bw -s 1048576: 66.8 MiB/s | 0.79 | ≥ 0.9: **not met** |",
		"| Put 4 MiB | 60.9 MiB/s | ib_write_bw -s 4194304: 67.1 MiB/s | 0.91 | ≥ 0.9: met |",
		"| allreduce 64 MiB float64, 4 ranks, over the queue pairs (XPU_LINKS=tcp) | 6533 ms | tcpbench, 4 processes over TCP links: 4202 ms | 1.55 | ≤ 1: **not met** |",
		"| allreduce 64 MiB float64, 4 ranks, in shared memory (default) | 612 ms | tcpbench, 4 processes, default links (shared memory): 655 ms | 0.93 | ≤ 1: met |",
		// A figure missing from the guest's output shows as one, with no
		// verdict: neither met nor not.
		"| stream 4 MiB | – | ib_write_bw -s 4194304: 67.1 MiB/s | 0.00 | no figure |",
	} {
		require.Contains(t, s, row)
	}
	require.Contains(t, s, "of 2026-11-24 at ")
	delete(figs, "tcp.np4.allreduce.64MiB")
	require.Contains(t, procsSection(figs, time.Now()),
		"| allreduce 64 MiB float64, 4 ranks, over the queue pairs (XPU_LINKS=tcp) | 6533 ms | tcpbench, 4 processes over TCP links: – | 0.00 | no figure |",
		"a missing reference is no figure, not a goal met")
}

func TestParseProcsBench(t *testing.T) {
	figs := parseProcsBench(`rdma.np4.allreduce.node.64MiB 612.00 ms
rdma.np4.allreduce.64MiB 6533.10 ms
shm.np4.allreduce.64MiB 655000000.0 ns/op
tcp.np4.allreduce.64MiB 4202000000.0 ns/op
mixed.np4.allreduce.64MiB 1.0 ns/op
`)
	require.Equal(t, map[string]float64{
		"rdma.np4.allreduce.node.64MiB": 612, "rdma.np4.allreduce.64MiB": 6533.1,
		"shm.np4.allreduce.64MiB": 655, "tcp.np4.allreduce.64MiB": 4202,
	}, figs, "tcpbench's ns/op read as ms; a job of mixed links is no reference")
}
