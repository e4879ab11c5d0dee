package rdma_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/rdmavm"
)

// TestGuestProcsBench measures the rdma backend with one process per rank,
// as perftest runs: it builds rdmabench (-tags rdma) and the tcp
// backend's tcpbench, boots one soft-RoCE guest, and runs there perftest's
// ib_send_lat and ib_write_bw, rdmabench on 2 ranks (ping-pong, streaming,
// Put) and on 4 (allreduce of 64 MiB), and tcpbench on 4 (the same
// allreduce over TCP links), then writes each figure beside its reference in
// its part of docs/results/rdma.md (spliceProcs). Like
// TestGuestBench it runs only with XPU_RDMA_BENCH=1 (make bench-rdma).
func TestGuestProcsBench(t *testing.T) {
	if os.Getenv(envBench) != "1" {
		t.Skipf("a benchmark (one guest boot, minutes): set %s=1 or run make bench-rdma; make test runs no benchmark", envBench)
	}
	if err := rdmavm.Available(); err != nil {
		t.Skipf("no RDMA guest here: %v", err)
	}
	dir := t.TempDir()
	build := func(out string, args ...string) rdmavm.File {
		cmd := exec.Command("go", append([]string{"build", "-o", filepath.Join(dir, out)}, args...)...)
		cmd.Dir = filepath.Join("..", "..")
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		return rdmavm.File{Host: filepath.Join(dir, out)}
	}
	files := []rdmavm.File{
		build("rdmabench", "-tags", "rdma", "./internal/tooling/rdmabench"),
		build("tcpbench", "./internal/tooling/tcpbench"),
	}
	script := `set -e
ip link set dummy0 mtu 9000
launch() { n=$1; port=$2; shift 2; i=0; pids=""
  while [ $i -lt $n ]; do
    XPU_RANK=$i XPU_WORLD_SIZE=$n XPU_MASTER_ADDR=127.0.0.1 XPU_MASTER_PORT=$port XPU_JOB_SECRET=bench "$@" & pids="$pids $!"; i=$((i+1))
  done
  for p in $pids; do wait $p; done; }
ref() { "$@" -F >/tmp/srv 2>&1 & sleep 1; "$@" -F 192.0.2.1; wait $!; }
ref ib_send_lat -s 8 -n 5000
ref ib_write_bw -s 1048576 -n 300
ref ib_write_bw -s 4194304 -n 100
launch 2 21000 rdmabench -n 5000 -big 1048576
launch 4 21001 rdmabench -only allreduce
launch 4 21002 env XPU_LINKS=tcp tcpbench -only '^allreduce\.64MiB$'
launch 4 21003 env XPU_LINKS=tcp rdmabench -only allreduce
launch 4 21004 tcpbench -only '^allreduce\.64MiB$'
`
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	var out strings.Builder
	res, err := rdmavm.Run(ctx, rdmavm.Job{Files: files, Script: script, Output: &out, MemoryMiB: 4096})
	t.Log(out.String())
	require.NoError(t, err)
	require.Zero(t, res.ExitCode)
	figs := parseProcsBench(out.String())
	section := procsSection(figs, time.Now())
	t.Log("\n" + section)
	require.NoError(t, os.WriteFile(resultsPage, []byte(spliceProcs(readPage(t), section)), 0o644))
	for _, r := range procsRows {
		for _, f := range []string{r.ours, r.against} {
			if figs[f] == 0 {
				t.Errorf("figure %s: not in the guest's output", f)
			}
		}
	}
}

// procsRow is a row of the one-process-per-rank table: a figure of
// parseProcsBench against another, both in unit (rdmabench reports its
// allreduce in ms, which guestRow's units do not cover).
type procsRow struct {
	guestRow
	unit string
}

var procsRows = []procsRow{
	{guestRow{"ping-pong 8 B, half round trip, median", "rdma.np2.pingpong.8B.p50", "ib_send_lat.8B.t_typical", "ib_send_lat -s 8, t_typical", false, 1.2}, "µs"},
	{guestRow{"ping-pong 8 B, half round trip, mean", "rdma.np2.pingpong.8B", "ib_send_lat.8B.t_avg", "ib_send_lat -s 8, t_avg", false, 0}, "µs"},
	{guestRow{"stream 1 MiB", "rdma.np2.bw.1MiB", "ib_write_bw.1MiB", "ib_write_bw -s 1048576", true, 0.9}, "MiB/s"},
	{guestRow{"stream 4 MiB", "rdma.np2.bw.4MiB", "ib_write_bw.4MiB", "ib_write_bw -s 4194304", true, 0.9}, "MiB/s"},
	{guestRow{"Put 1 MiB", "rdma.np2.put.1MiB", "ib_write_bw.1MiB", "ib_write_bw -s 1048576", true, 0.9}, "MiB/s"},
	{guestRow{"Put 4 MiB", "rdma.np2.put.4MiB", "ib_write_bw.4MiB", "ib_write_bw -s 4194304", true, 0.9}, "MiB/s"},
	{guestRow{"allreduce 64 MiB float64, 4 ranks, in shared memory (default)", "rdma.np4.allreduce.node.64MiB", "shm.np4.allreduce.64MiB", "tcpbench, 4 processes, default links (shared memory)", false, 1}, "ms"},
	{guestRow{"allreduce 64 MiB float64, 4 ranks, over the queue pairs (XPU_LINKS=tcp)", "rdma.np4.allreduce.64MiB", "tcp.np4.allreduce.64MiB", "tcpbench, 4 processes over TCP links", false, 1}, "ms"},
}

// procsSection is the page's part that TestGuestProcsBench writes: what
// it ran and the table of its figures.
func procsSection(figs map[string]float64, when time.Time) string {
	var p strings.Builder
	p.WriteString("## One process per rank (rdmabench)\n\n")
	p.WriteString("`make bench-rdma` also runs `TestGuestProcsBench`, in a second boot: perftest's references, then\n")
	p.WriteString("`internal/tooling/rdmabench` as 2 rank processes (ping-pong 5 × 5000 round trips, streaming and\n")
	p.WriteString("Put with 16 in flight, every run checked) and as 4 (allreduce of 64 MiB float64), and the procs backend's\n")
	p.WriteString("`tcpbench` as 4 processes for the same allreduce — as perftest and the OSU benchmarks run. Both\n")
	p.WriteString("allreduces run twice: by default (ranks of one machine run their collectives in a region of shared\n")
	p.WriteString("memory, both backends alike) and with `XPU_LINKS=tcp` (rdma: over the queue pairs; tcp: over TCP links).\n")
	p.WriteString("Figures\n")
	fmt.Fprintf(&p, "of %s at %s, medians of 5 runs (perftest's: one run):\n\n", when.UTC().Format("2006-01-02"), codeVersion())
	p.WriteString("| case | ours | against | ratio | goal |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range procsRows {
		p.WriteString(r.line(figs[r.ours], figs[r.against], r.unit))
	}
	return p.String()
}

var (
	procsLine = regexp.MustCompile(`^((?:rdma|tcp|shm)\.np\d+\.\S+) ([\d.]+) (\S+)$`)
	perfLat   = regexp.MustCompile(`^\s*(\d+)\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+([\d.]+)`)
	perfBW    = regexp.MustCompile(`^\s*(\d+)\s+\d+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s*$`)
)

// parseProcsBench reads rdmabench's and tcpbench's figure lines (tcp's
// and shm's allreduce in ms, as rdmabench's) and perftest's result lines.
func parseProcsBench(out string) map[string]float64 {
	figs := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if m := procsLine.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			if strings.HasPrefix(m[3], "ns") {
				v /= 1e6 // tcpbench's ns to rdmabench's ms
			}
			figs[m[1]] = v
			continue
		}
		if m := perfLat.FindStringSubmatch(l); m != nil && m[1] == "8" {
			figs["ib_send_lat.8B.t_typical"], _ = strconv.ParseFloat(m[2], 64)
			figs["ib_send_lat.8B.t_avg"], _ = strconv.ParseFloat(m[3], 64)
			continue
		}
		if m := perfBW.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			v, _ := strconv.ParseFloat(m[2], 64)
			figs[fmt.Sprintf("ib_write_bw.%dMiB", n>>20)] = v
		}
	}
	return figs
}
