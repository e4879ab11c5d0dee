#!/usr/bin/env bash
# make fuzz: runs every fuzz target of the module, one at a time, for
# FUZZTIME each, and prints a summary: executions, rate and new interesting
# inputs per target. Exits 1 when a target fails (the failing input is then
# in <pkg>/testdata/fuzz/<FuzzName>/, where go test put it; commit it as a
# regression test once fixed).
#
# Settings (environment, or make fuzz VAR=value):
#   FUZZTIME          time per target (default 30s)
#   FUZZ              regexp: run only the targets whose name matches it
#   FUZZPARALLEL      fuzzing workers per target (default: the CPUs, GOMAXPROCS)
#   FUZZMINIMIZETIME  bound on the minimization of each new input (default
#                     10s; go test's is 60s, which a slow minimization can
#                     spend at no executions per second)
#   FUZZKEEP=1        afterwards, copy the inputs the fuzzer found interesting
#                     (its cache, $(go env GOCACHE)/fuzz) into each target's
#                     testdata/fuzz/<FuzzName>/, the corpus kept in the
#                     repository, which go test runs as unit tests
#   FUZZLOG           directory for the full output of each target (default
#                     a temporary one, removed unless a target failed)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZ=${FUZZ:-.}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-10s}
logdir=${FUZZLOG:-$(mktemp -d "${TMPDIR:-/tmp}/xpu-fuzz.XXXXXX")}
mkdir -p "$logdir"
cache="$($GO env GOCACHE)/fuzz"

# seconds converts a Go duration as the fuzzer prints it (1h2m3s) to seconds.
seconds() {
  local d=$1 s=0 n
  while [[ $d =~ ^([0-9.]+)(h|m|s)(.*)$ ]]; do
    n=${BASH_REMATCH[1]}
    case ${BASH_REMATCH[2]} in
      h) s=$(awk -v a="$s" -v b="$n" 'BEGIN{print a+b*3600}') ;;
      m) s=$(awk -v a="$s" -v b="$n" 'BEGIN{print a+b*60}') ;;
      s) s=$(awk -v a="$s" -v b="$n" 'BEGIN{print a+b}') ;;
    esac
    d=${BASH_REMATCH[3]}
  done
  echo "$s"
}

summary=()
failed=0
# The packages of this module with a fuzz target (other modules, such as
# the examples, fuzz on their own).
while read -r dir pkg; do
  grep -qsE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' "$dir"/*_test.go || continue
  for name in $($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    [[ $name =~ $FUZZ ]] || continue
    log="$logdir/$name.log"
    echo "== $pkg $name for $FUZZTIME"
    args=(-run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME")
    if [ -n "${FUZZPARALLEL:-}" ]; then
      args+=(-parallel "$FUZZPARALLEL")
    fi
    status=ok
    # Only the fuzzer's progress lines and a failure's report are shown;
    # the rest (the build's output) is in the log.
    if ! $GO test "${args[@]}" "$pkg" >"$log" 2>&1; then
      status=FAILED
      failed=1
    fi
    grep -E '^(fuzz: elapsed|--- FAIL|\s+\S+\.go:[0-9]+:|\s*Failing input|\s*To re-run|\s+go test -run|panic:|FAIL|ok )' "$log" || true
    last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -1 || true)
    execs=0 rate=0 interesting=0
    if [[ $last =~ elapsed:\ ([0-9hms.]+),\ execs:\ ([0-9]+).*new\ interesting:\ ([0-9]+) ]]; then
      secs=$(seconds "${BASH_REMATCH[1]}")
      execs=${BASH_REMATCH[2]}
      interesting=${BASH_REMATCH[3]}
      rate=$(awk -v e="$execs" -v s="$secs" 'BEGIN{ if (s > 0) printf "%d", e/s; else print 0 }')
    fi
    summary+=("$(printf '%-18s %-38s %12s %10s %12s  %s' "$name" "$pkg" "$execs" "$rate" "$interesting" "$status")")
    if [ "${FUZZKEEP:-}" = 1 ] && [ -d "$cache/$pkg/$name" ]; then
      mkdir -p "$dir/testdata/fuzz/$name"
      cp -n "$cache/$pkg/$name"/* "$dir/testdata/fuzz/$name/" 2>/dev/null || true
      echo "   corpus: $(ls "$dir/testdata/fuzz/$name" | wc -l) inputs in $dir/testdata/fuzz/$name"
    fi
  done
done < <($GO list -f '{{.Dir}} {{.ImportPath}}' ./...)

echo
printf '%-18s %-38s %12s %10s %12s  %s\n' target package execs "execs/s" "new inputs" result
printf '%s\n' "${summary[@]}"
if [ "$failed" = 1 ]; then
  echo "fuzz: a target failed; full output in $logdir"
  exit 1
fi
if [ -z "${FUZZLOG:-}" ]; then
  rm -rf "$logdir"
fi
