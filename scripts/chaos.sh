#!/usr/bin/env bash
# make chaos: the chaos run of the tcp backend and of xpu run's launcher
# (internal/tooling/chaos; docs/results/chaos.md): CHAOS_N repetitions of a 4-rank
# allreduce job struck by a fault — a rank killed (SIGKILL) or frozen
# (SIGSTOP), its links cut (network namespaces and iptables; skipped, saying
# why, where they cannot be made: it needs root), or the launcher killed —
# printed as a table of the kinds of fault against the outcomes: hangs,
# wrong results, errors, orphaned processes, leftover files. Exits 1 when a
# repetition found one. `go test ./internal/tooling/chaos` runs a short version
# (one repetition of each kind).
#
# Settings (environment, or make chaos VAR=value):
#   CHAOS_N        repetitions (default 100)
#   CHAOS_SEED     seed of the victims, moments and cuts (default 1)
#   CHAOS_TIMEOUT  total time bound (default 30m)
#   CHAOS_FLAGS    more flags of the runner (go run ./internal/tooling/chaos/cmd/chaos -h)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
bin=bin/xpu-chaos
mkdir -p bin
$GO build -o "$bin" ./internal/tooling/chaos/cmd/chaos
# shellcheck disable=SC2086 # CHAOS_FLAGS is a list of flags
exec "$bin" -n "${CHAOS_N:-100}" -seed "${CHAOS_SEED:-1}" -timeout "${CHAOS_TIMEOUT:-30m}" ${CHAOS_FLAGS:-}
