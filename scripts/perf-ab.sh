#!/usr/bin/env bash
# Compares the multi-process communicator's hot paths of two revisions in one
# run, in interleaved rounds (the order alternates, so that neither build
# always runs second), and prints a table of the median and the worst round
# of each: the 2-rank 8-byte ping-pong, 8-byte allreduce and 64 MiB allreduce
# over shared memory (tcpbench, one process per rank under xpu run), and the
# in-process tcp ping-pong over TCP loopback (bench.TCP), with the raw Go TCP
# ping-pong of the same benchmark beside it as the machine's own reference.
#
#   scripts/perf-ab.sh BEFORE [AFTER] [ROUNDS]    # AFTER: the working tree; ROUNDS: 10
#
# Each revision is built in a worktree of its own under a temporary folder,
# which is removed at the end.
set -euo pipefail
before=${1:?usage: scripts/perf-ab.sh BEFORE [AFTER] [ROUNDS]}
after=${2:-}
rounds=${3:-10}
top=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
cleanup() {
	for v in before after; do
		[ -d "$tmp/$v" ] && git -C "$top" worktree remove --force "$tmp/$v" >/dev/null 2>&1 || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# build V REV: tcpbench and the multi-process backend's test binary, wherever
# the revision keeps them.
build() {
	local v=$1 rev=$2 dir=$top
	if [ -n "$rev" ]; then
		dir=$tmp/$v
		git -C "$top" worktree add --detach -q "$dir" "$rev"
	fi
	local pkg
	for pkg in ./internal/tooling/tcpbench ./backends/tcp/internal/tcpbench; do
		if [ -d "$dir/$pkg" ]; then
			(cd "$dir" && go build -o "$tmp/tcpbench-$v" "$pkg")
			break
		fi
	done
	for pkg in ./backends/procs ./backends/tcp; do
		if [ -f "$dir/$pkg/bench_test.go" ]; then
			(cd "$dir" && go test -c -o "$tmp/tcp-$v.test" "$pkg")
			break
		fi
	done
}
build before "$before"
build after "$after"
(cd "$top" && go build -o "$tmp/xpu" ./cmd/xpu)

for r in $(seq 1 "$rounds"); do
	order="before after"
	if (( r % 2 == 0 )); then order="after before"; fi
	for v in $order; do
		"$tmp/xpu" run -n 2 -- "$tmp/tcpbench-$v" -only '^(pingpong\.8B|allreduce\.(8B|64MiB))$' \
			-o "$tmp/procs-$v.txt" >/dev/null 2>&1
		"$tmp/tcp-$v.test" -test.run '^$' -test.bench '^BenchmarkTCP/tcp\.pingpong\.8B$' -test.benchtime 20000x \
			-test.count 1 2>/dev/null | awk '/ns\/op/ { sub(/-[0-9]+$/, "", $1); sub(/^BenchmarkTCP\//, "inproc.", $1); print $1, $3, "ns/op" }' \
			>>"$tmp/procs-$v.txt"
	done
done

# The table: per case, the median and the worst round of each build.
awk -v rounds="$rounds" '
	function median(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function show(k, x) {
		if (k ~ /MiB/) return sprintf("%.2f ms", x / 1e6)
		if (k ~ /^inproc/) return sprintf("%.2f µs", x / 1e3)
		return sprintf("%.0f ns", x)
	}
	FNR == 1 { v = FILENAME ~ /before/ ? "before" : "after" }
	{ n[$1, v]++; val[$1, v, n[$1, v]] = $2; if ($2 > worst[$1, v]) worst[$1, v] = $2; keys[$1] = 1 }
	END {
		printf "| case | before: median | worst | after: median | worst | after/before |\n|---|---|---|---|---|---|\n"
		for (k in keys) {
			split("", b); split("", a)
			for (i = 1; i <= n[k, "before"]; i++) b[i] = val[k, "before", i]
			for (i = 1; i <= n[k, "after"]; i++) a[i] = val[k, "after", i]
			mb = median(b, n[k, "before"]); ma = median(a, n[k, "after"])
			printf "| %s | %s | %s | %s | %s | %.2f |\n", k, show(k, mb), show(k, worst[k, "before"]), show(k, ma), show(k, worst[k, "after"]), ma / mb | "sort"
		}
		close("sort")
		printf "\n%d interleaved rounds each\n", rounds
	}' "$tmp/procs-before.txt" "$tmp/procs-after.txt"
