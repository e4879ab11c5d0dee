package rdma_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/tooling/bench/stats"
	"github.com/xpu-go/xpu/internal/tooling/rdmavm"
)

// The measurement of docs/results/rdma.md: this package's benchmarks on
// soft-RoCE against perftest's on the same device, in one boot of the
// qemu guest of internal/tooling/rdmavm. Under emulation the absolute figures
// mean little; the ratios, taken in the same boot, are what it reports.
const (
	// envBench must be 1 for TestGuestBench to run (make bench-rdma).
	envBench = "XPU_RDMA_BENCH"
	// envBenchRounds sets the number of rounds (default 5).
	envBenchRounds = "XPU_RDMA_BENCH_ROUNDS"
	// envBenchVariants lists the runs besides the defaults (see
	// guestRuns); "none" for none.
	envBenchVariants = "XPU_RDMA_BENCH_VARIANTS"
	// envBenchMTU sets the MTU of the guest's network device under rxe0
	// (default 9000: RoCE's largest MTU, 4096; 1500 gives RoCE 1024).
	envBenchMTU = "XPU_RDMA_BENCH_MTU"
	// benchCommand is the command that writes the results page.
	benchCommand = "make bench-rdma"
	// resultsPage is the page TestGuestBench writes, from this directory.
	resultsPage = "../../docs/results/rdma.md"
)

// defaultVariants are the runs besides the defaults that the page shows:
// waiters and engine that spin longer than an emulated round trip, and
// that never spin.
const defaultVariants = "spin=10ms@^Benchmark(PingPong|Stream)$;spin=-1ns@^Benchmark(PingPong|Stream)$"

// guestRef is a perftest run: its server in the background, its client
// against it.
type guestRef struct {
	name string // figure name after "ref:"
	cmd  string // the tool and its arguments, both sides
}

// guestRefs are the references, each run once a round.
var guestRefs = []guestRef{
	{"send_lat.8B", "ib_send_lat -s 8 -n 5000"},
	{"send_lat.64KiB", "ib_send_lat -s 65536 -n 500"},
	{"write_bw.4KiB", "ib_write_bw -s 4096 -n 5000"},
	{"write_bw.1MiB", "ib_write_bw -s 1048576 -n 100"},
	{"write_bw.4MiB", "ib_write_bw -s 4194304 -n 25"},
	{"read_bw.1MiB", "ib_read_bw -s 1048576 -n 100"},
	{"read_bw.4MiB", "ib_read_bw -s 4194304 -n 25"},
}

// guestRun is a run of Go benchmarks in a round.
type guestRun struct {
	label  string // "" for the defaults; names the figures "go[label]:…"
	bin    string // the test binary
	config string // XPU_RDMA_BENCH_CONFIG
	bench  string // -test.bench
}

// guestRuns are the Go runs of a round: the defaults; the ping-pong of
// package verbs, SENDs answered from Go with no protocol on top (the
// floor of the binding); and each variant of XPU_RDMA_BENCH_VARIANTS,
// "config@pattern;…", whose rows follow the defaults' in the table.
func guestRuns() ([]guestRun, error) {
	runs := []guestRun{
		{"", "rdma.test", "", "^Benchmark(PingPong|Stream|Put|Batch|Allreduce|Register|Clock)$"},
		{"verbs", "verbs.test", "", "^Benchmark(PingPong|PollEmpty)$"},
	}
	vs, ok := os.LookupEnv(envBenchVariants)
	if !ok {
		vs = defaultVariants
	}
	for v := range strings.SplitSeq(vs, ";") {
		if v = strings.TrimSpace(v); v == "" || v == "none" {
			continue
		}
		cfg, pat, ok := strings.Cut(v, "@")
		if !ok {
			pat = "^Benchmark(PingPong|Stream|Put|Allreduce)$"
		}
		if _, err := parseBenchConfig(cfg); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", envBenchVariants, v, err)
		}
		if _, err := regexp.Compile(pat); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", envBenchVariants, v, err)
		}
		runs = append(runs, guestRun{cfg, "rdma.test", cfg, pat})
	}
	return runs, nil
}

// guestRow is a line of the table: our figure, what it is compared with,
// and the goal.
type guestRow struct {
	what    string
	ours    string // a figure (see parseGuestBench)
	against string
	doc     string  // what against is
	rate    bool    // MiB/s, higher is better; else µs, lower is better
	goal    float64 // ratio ours/against to reach (at most for times, at least for rates); 0: for information
}

var guestRows = []guestRow{
	{"ping-pong 8 B, half round trip: median", "go:BenchmarkPingPong/8B#median", "ref:send_lat.8B",
		"ib_send_lat -s 8, t_typical", false, 1.2},
	{"", "go:BenchmarkPingPong/8B#median", "go[verbs]:BenchmarkPingPong#median",
		"SEND answered by SEND from Go, no protocol (package verbs), median", false, 0},
	{"ping-pong 8 B, half round trip: mean", "go:BenchmarkPingPong/8B", "ref:send_lat.8B#avg",
		"ib_send_lat -s 8, t_avg", false, 0},
	{"ping-pong 64 KiB, half round trip: median", "go:BenchmarkPingPong/64KiB#median", "ref:send_lat.64KiB",
		"ib_send_lat -s 65536, t_typical", false, 0},
	{"stream 1 MiB, window of 16", "go:BenchmarkStream/1MiB#rate", "ref:write_bw.1MiB",
		"ib_write_bw -s 1048576, BW average", true, 0.9},
	{"", "go:BenchmarkStream/1MiB#rate", "ref:read_bw.1MiB",
		"ib_read_bw -s 1048576, BW average", true, 0},
	{"stream 4 MiB, window of 16", "go:BenchmarkStream/4MiB#rate", "ref:write_bw.4MiB",
		"ib_write_bw -s 4194304, BW average", true, 0.9},
	{"", "go:BenchmarkStream/4MiB#rate", "ref:read_bw.4MiB",
		"ib_read_bw -s 4194304, BW average", true, 0},
	{"Put 1 MiB, window of 16", "go:BenchmarkPut/1MiB#rate", "ref:write_bw.1MiB",
		"ib_write_bw -s 1048576, BW average", true, 0.9},
	{"Put 4 MiB, window of 16", "go:BenchmarkPut/4MiB#rate", "ref:write_bw.4MiB",
		"ib_write_bw -s 4194304, BW average", true, 0.9},
	{"batch of 1,024 Puts of 4 KiB", "go:BenchmarkBatch/put/batch-1024x4KiB#rate", "ref:write_bw.4KiB",
		"ib_write_bw -s 4096, BW average", true, 0.9},
	{"batch of 1,024 Gets of 4 KiB", "go:BenchmarkBatch/get/batch-1024x4KiB#rate", "go:BenchmarkBatch/get/one-4MiB#rate",
		"one Get of 4 MiB", true, 0},
	{"allreduce 64 MiB float64, 4 ranks", "go:BenchmarkAllreduce/rdma/4r/64MiB", "go:BenchmarkAllreduce/tcp/4r/64MiB",
		"procs backend over TCP links, loopback group", false, 1.0},
	{"allreduce 64 KiB float64, 4 ranks", "go:BenchmarkAllreduce/rdma/4r/64KiB", "go:BenchmarkAllreduce/tcp/4r/64KiB",
		"procs backend over TCP links, loopback group", false, 0},
	{"register + deregister 4 MiB", "go:BenchmarkRegister/4MiB", "go:BenchmarkStream/4MiB",
		"one message of stream 4 MiB", false, 0},
	{"time.Now", "go:BenchmarkClock", "go:BenchmarkPingPong/8B#median",
		"ping-pong 8 B, median", false, 0},
	{"Poll of an empty queue (cgo)", "go[verbs]:BenchmarkPollEmpty", "go:BenchmarkPingPong/8B#median",
		"ping-pong 8 B, median", false, 0},
}

// envInt reads the whole number in the variable name, def when unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	return n
}

// TestGuestBench builds this package's test binary and package verbs'
// with -tags rdma, boots the guest once and runs there, round after
// round, perftest's references and the Go benchmarks on the kernel's
// verbs; it prints the medians, the ratios and the goals, and writes
// the first part of docs/results/rdma.md (keepTail).
func TestGuestBench(t *testing.T) {
	if os.Getenv(envBench) != "1" {
		t.Skipf("measures the benchmarks against perftest in a qemu guest, for minutes: run by %s (%s=1), never by make test, which runs no benchmark", benchCommand, envBench)
	}
	if err := rdmavm.Available(); err != nil {
		t.Skipf("no RDMA guest here: %v", err)
	}
	rounds := envInt(t, envBenchRounds, 5)
	mtu := envInt(t, envBenchMTU, 9000)
	runs, err := guestRuns()
	require.NoError(t, err)
	dir := t.TempDir()
	files := buildGuestTests(t, dir)

	ctx, cancel := context.WithTimeout(t.Context(), 28*time.Minute)
	defer cancel()
	w := &lineLog{t: t}
	started := time.Now()
	res, err := rdmavm.Run(ctx, rdmavm.Job{
		Files:  files,
		Script: guestBenchScript(rounds, mtu, runs),
		Output: w,
		// 4 ranks of a 64 MiB allreduce hold 2 buffers each, and the
		// collective scratch; the tcp group as many.
		MemoryMiB: 4096,
	})
	w.flush()
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "the benchmarks failed in the guest (their output is above)")
	figs, info := parseGuestBench(w.all.String())
	info["boot"] = res.Boot.Round(time.Second).String()
	info["run"] = res.Run.Round(time.Second).String()
	rows := tableRows(runs)
	page := guestBenchPage(figs, info, rows, rounds, started)
	t.Log("\n" + page)
	require.NoError(t, os.WriteFile(resultsPage, []byte(keepTail(readPage(t), page)), 0o644))
	for _, r := range rows {
		for _, f := range []string{r.ours, r.against} {
			if len(figs[f]) < rounds {
				t.Errorf("figure %s: %d of %d rounds", f, len(figs[f]), rounds)
			}
		}
	}
}

// guestBenchScript is the guest's script: the machine's description,
// then rounds of every reference and every Go run.
func guestBenchScript(rounds, mtu int, runs []guestRun) string {
	var s strings.Builder
	fmt.Fprintf(&s, `set -e
ip link set %s mtu %d
# The port's MTU follows the device's; wait for it and the port to be up.
i=0
until ibv_devinfo -d $XPU_RDMAVM_DEVICE | grep -q PORT_ACTIVE; do i=$((i+1)); [ $i -lt 100 ]; usleep 50000; done
# tcplisten PORT: waits until a TCP socket listens on PORT (hex) of 0.0.0.0.
tcplisten() { until grep -q "^ *[0-9]*: 00000000:$1 00000000:0000 0A" /proc/net/tcp; do usleep 20000; done; }
# ref NAME TOOL ARGS...: perftest's server in the background, its client
# against it (-F: no failure on a CPU frequency it cannot trust). A run
# whose calibration of the CPU's clock failed (a noisy machine: "r^2 <
# 0.9", and no figure) is run again, twice at most.
ref() {
	name=$1; shift
	for try in 1 2 3; do
		"$@" -F -d $XPU_RDMAVM_DEVICE -x $XPU_RDMAVM_GID_INDEX >/tmp/ref-server 2>&1 &
		tcplisten 4853 # 18515, perftest's port
		"$@" -F -d $XPU_RDMAVM_DEVICE -x $XPU_RDMAVM_GID_INDEX $XPU_RDMAVM_ADDR >/tmp/ref-client 2>&1 || { cat /tmp/ref-client; exit 1; }
		wait $!
		grep -qF 'r^2' /tmp/ref-client || break
	done
	echo "@@ ref $name"
	cat /tmp/ref-client
}
# run LABEL CONFIG BINARY PATTERN: the Go benchmarks of BINARY matching
# PATTERN once, on the verbs, the ranks configured by CONFIG.
run() {
	echo "@@ go $1"
	XPU_RDMA_BENCH_FABRIC=verbs XPU_RDMA_BENCH_CONFIG="$2" $3 -test.run '^$' -test.bench "$4" -test.count 1 -test.timeout 20m
}
echo "@@ info kernel $(uname -r)"
echo "@@ info nproc $(nproc)"
echo "@@ info cpu $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
echo "@@ info clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
echo "@@ info mtu $(cat /sys/class/net/%s/mtu), RoCE $(ibv_devinfo -d $XPU_RDMAVM_DEVICE | sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p')"
echo "@@ info perftest $(ib_send_lat --version 2>&1 | sed -n 's/^Version: //p')"
`, rdmavm.Netdev, mtu, rdmavm.Netdev)
	for i := range rounds {
		fmt.Fprintf(&s, "echo '@@ round %d'\n", i+1)
		for _, r := range guestRefs {
			fmt.Fprintf(&s, "ref %s %s\n", r.name, r.cmd)
		}
		for _, r := range runs {
			fmt.Fprintf(&s, "run '%s' '%s' %s '%s'\n", r.label, r.config, r.bin, r.bench)
		}
	}
	return s.String()
}

var (
	goBenchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
	numbers     = regexp.MustCompile(`^\s*\d+(\s+[\d.]+)+\s*$`)
)

// parseGuestBench reads the guest's output into the figures of every
// round and the machine's description. A Go benchmark gives "go:Name"
// (µs per op), "go:Name#rate" (MiB/s) and "go:Name#median" (µs, from
// median-ns/op or µs-p50); a run with a label gives "go[label]:Name…". A
// perftest latency gives "ref:name" (t_typical, µs) and "ref:name#avg"
// (t_avg); a bandwidth "ref:name" (BW average: perftest's "MB/sec" are
// MiB/s, 2^20 bytes a second). Figures perftest could not compute (0,
// inf) are left out.
func parseGuestBench(out string) (map[string][]float64, map[string]string) {
	figs := map[string][]float64{}
	add := func(k string, v float64) {
		if v > 0 && !math.IsInf(v, 0) {
			figs[k] = append(figs[k], v)
		}
	}
	info := map[string]string{}
	var ref, label string
	inRef := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "@@ "); ok {
			kind, arg, _ := strings.Cut(rest, " ")
			switch kind {
			case "info":
				k, v, _ := strings.Cut(arg, " ")
				info[k] = v
			case "ref":
				ref, inRef = arg, true
			case "go":
				label, inRef = arg, false
			}
			continue
		}
		if inRef && numbers.MatchString(line) {
			f := strings.Fields(line)
			num := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v }
			switch len(f) {
			case 9: // #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
				add("ref:"+ref, num(4))
				add("ref:"+ref+"#avg", num(5))
			case 5: // #bytes #iterations BW-peak BW-average MsgRate
				add("ref:"+ref, num(3))
			default:
				continue
			}
			inRef = false
			continue
		}
		if m := goBenchLine.FindStringSubmatch(line); m != nil {
			key := "go:" + m[1]
			if label != "" {
				key = "go[" + label + "]:" + m[1]
			}
			f := strings.Fields(m[2])
			for i := 0; i+1 < len(f); i += 2 {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					continue
				}
				switch f[i+1] {
				case "ns/op":
					add(key, v/1e3)
				case "MB/s":
					add(key+"#rate", v*1e6/(1<<20))
				case "median-ns/op":
					add(key+"#median", v/1e3)
				case "µs-p50":
					add(key+"#median", v)
				}
			}
		}
	}
	return figs, info
}

// tableRows are guestRows, then those of each variant among runs whose
// pattern takes the benchmark: its figures against the same references,
// and against its own run of the procs backend.
func tableRows(runs []guestRun) []guestRow {
	rows := slices.Clone(guestRows)
	for _, v := range runs {
		if v.config == "" {
			continue
		}
		re := regexp.MustCompile(v.bench)
		for _, r := range guestRows {
			name, ok := strings.CutPrefix(r.ours, "go:")
			if r.what == "" || !ok || !re.MatchString(strings.Split(name, "/")[0]) ||
				strings.HasPrefix(name, "BenchmarkRegister") || strings.HasPrefix(name, "BenchmarkClock") {
				continue
			}
			r.what = fmt.Sprintf("%s, %s", r.what, v.config)
			r.ours = "go[" + v.label + "]:" + name
			if a, ok := strings.CutPrefix(r.against, "go:"); ok {
				r.against = "go[" + v.label + "]:" + a
			}
			rows = append(rows, r)
		}
	}
	return rows
}

func (r guestRow) unit() string {
	if r.rate {
		return "MiB/s"
	}
	return "µs"
}

// line is the row's line of a results table: ours against against, both
// in unit, their ratio and its verdict. A row without a name continues
// the one above (same figure, another reference).
func (r guestRow) line(ours, against float64, unit string) string {
	ratio := 0.0
	if against > 0 {
		ratio = ours / against
	}
	o := fig(ours, unit)
	if r.what == "" {
		o = "〃"
	}
	rs := fmt.Sprintf("%.2f", ratio)
	if ratio > 0 && ratio < 0.1 {
		rs = fmt.Sprintf("%.2g", ratio)
	}
	return fmt.Sprintf("| %s | %s | %s: %s | %s | %s |\n", r.what, o, r.doc, fig(against, unit), rs, r.verdict(ratio))
}

// verdict says whether the ratio meets the goal.
func (r guestRow) verdict(ratio float64) string {
	switch {
	case r.goal == 0:
		return ""
	case ratio == 0:
		return "no figure"
	case r.rate && ratio >= r.goal:
		return fmt.Sprintf("≥ %.2g: met", r.goal)
	case r.rate:
		return fmt.Sprintf("≥ %.2g: **not met**", r.goal)
	case ratio <= r.goal:
		return fmt.Sprintf("≤ %.2g: met", r.goal)
	}
	return fmt.Sprintf("≤ %.2g: **not met**", r.goal)
}

// guestBenchPage is docs/results/rdma.md.
func guestBenchPage(figs map[string][]float64, info map[string]string, rows []guestRow, rounds int, started time.Time) string {
	var p strings.Builder
	accel := os.Getenv("XPU_RDMAVM_ACCEL")
	if accel == "" {
		accel = "tcg"
	}
	p.WriteString("# RDMA communicator: measured figures\n\n")
	fmt.Fprintf(&p, "Written by `%s` on %s:\n\n", benchCommand, started.UTC().Format("2006-01-02"))
	p.WriteString("    XPU_RDMA_BENCH=1 go test -count=1 -run '^TestGuestBench$' -v -timeout 30m ./backends/rdma/\n\n")
	p.WriteString("It boots one qemu guest with soft-RoCE (rxe0 on a dummy network device, internal/tooling/rdmavm) and runs there,\n")
	fmt.Fprintf(&p, "%d rounds over, perftest's references and the Go benchmarks of backends/rdma on the kernel's verbs\n", rounds)
	p.WriteString("(`go test -c -tags rdma`, `XPU_RDMA_BENCH_FABRIC=verbs`). A figure is the median of its rounds; in each\n")
	p.WriteString("round every perftest reference runs once, then every Go benchmark once (`-test.count 1`), so that both\n")
	p.WriteString("sides see the same moments of the machine.\n\n")
	if accel == "tcg" {
		p.WriteString("**The guest's CPU is emulated (qemu's TCG) on a shared host: its absolute figures say nothing about real\n")
		p.WriteString("hardware. Only the ratios count, both sides measured in the same boot on the same device.**\n\n")
	} else {
		fmt.Fprintf(&p, "The guest runs under %s on a shared host: compare ratios, measured in the same boot, not absolute figures.\n\n", accel)
	}
	p.WriteString("## Machine\n\n")
	fmt.Fprintf(&p, "- host: %d cores (`nproc`), %s; %s\n", runtime.NumCPU(), hostCPU(), runtime.Version())
	fmt.Fprintf(&p, "- guest: qemu (%s), %s vCPUs (%s), kernel %s, clock source %s; boot %s, run %s\n",
		accel, info["nproc"], info["cpu"], info["kernel"], info["clocksource"], info["boot"], info["run"])
	fmt.Fprintf(&p, "- network: MTU %s (the dummy device's, RoCE's active MTU)\n", info["mtu"])
	fmt.Fprintf(&p, "- rdma-core %s (the host's libraries, copied into the guest); perftest %s (%s)\n",
		debVersion("libibverbs1"), debVersion("perftest"), info["perftest"])
	fmt.Fprintf(&p, "- code: %s\n\n", codeVersion())
	p.WriteString("## Figures\n\n")
	p.WriteString("| case | ours | against | ratio | goal |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		p.WriteString(r.line(stats.Median(figs[r.ours]), stats.Median(figs[r.against]), r.unit()))
	}
	p.WriteString(`
- Times are µs per operation; rates are MiB/s (2^20 bytes a second, as perftest's "MB/sec").
- perftest's t_typical is the median of its iterations' round trips, halved for SEND and WRITE
  (perftest_parameters.c, print_report_lat: rtt_factor 2): half a round trip. The ping-pong's median is
  the same: rank 0 times each round trip (time.Now, once a round trip) and reports half the median. Its
  mean (ns/op: b.N messages one way each) goes against perftest's t_avg, both far above their medians
  on a noisy machine.
- The verbs row is package verbs' BenchmarkPingPong: Go posting a SEND and busy-polling for the answer,
  with no protocol, matching or request on top — the floor of any Go communicator on this binding.
- perftest's bandwidth tests keep up to their tx depth of WRITEs (READs) in flight on one queue pair, with
  no software between messages. The stream keeps a window of 16 Isends outstanding and the receiver
  pre-posts as many Irecvs, with an 8-byte answer after each window (osu_bw's pattern); messages above
  the eager limit go by rendezvous, which the receiver READs, so ib_read_bw is the floor of that path.
  Put is an RDMA WRITE straight into the exposed region, 16 outstanding, as ib_write_bw's WRITEs. Buffers
  are Go memory (memspace.FromSlice), registered for each message.
- The allreduce ranks are goroutines of one process, each rank with its own device context and queue
  pairs; the tcp figure is the procs backend's loopback group (over TCP links) (4 ranks in one process over 127.0.0.1) in
  the same binary and boot, each after one untimed call, its links forced to TCP (by default ranks of
  one machine link through shared memory and reduce in a region they all map: a comparison no network
  transport is meant to win).
- Register is one ibv_reg_mr + ibv_dereg_mr of a 4 MiB buffer already touched, against one message of
  the stream: what a rendezvous pays on each side for the registration of a buffer the cache cannot
  keep. time.Now is what the progress engine and the spinning waiters read their clock with.
- Rows with a setting (spin=…, chunk=…) are the same benchmarks with that rdma.Config field changed
  (XPU_RDMA_BENCH_CONFIG), in the same rounds.
`)
	return p.String()
}

func fig(v float64, unit string) string {
	switch {
	case v == 0:
		return "–"
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// hostCPU is the host's CPU model.
func hostCPU() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "CPU unknown"
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "CPU unknown"
}

// debVersion is the version of a Debian package on the host, or "unknown".
func debVersion(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output()
	if err != nil || len(out) == 0 {
		return "unknown"
	}
	return string(out)
}

// codeVersion names the commit measured, and says whether the tree had
// changes beside it.
func codeVersion() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown commit"
	}
	v := "commit " + strings.TrimSpace(string(out))
	// The results page itself is not a change of the code measured:
	// TestGuestProcsBench runs after TestGuestBench has written it.
	st, err := exec.Command("git", "-C", filepath.Join("..", ".."), "status", "--porcelain", "--untracked-files=no",
		"--", ".", ":(exclude)docs/results/rdma.md").Output()
	if err == nil && len(st) > 0 {
		v += ", with uncommitted changes"
	}
	return v
}
