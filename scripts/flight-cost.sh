#!/bin/sh
# flight-cost.sh: what the flight recorder costs the 2-rank 8-byte
# shared-memory ping-pong. ROUNDS rounds (default 10); each runs the
# ping-pong with the recorder on (the default) and off (XPU_FLIGHT_SIZE=0),
# alternating which goes first, and the ratio on/off is printed per round,
# then the median and the worst.
set -eu
rounds=${ROUNDS:-10}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/xpu" ./cmd/xpu
go build -o "$dir/tcpbench" ./internal/tooling/tcpbench
one() { # $1: on or off
	if [ "$1" = off ]; then
		XPU_FLIGHT_SIZE=0 "$dir/xpu" run -n 2 -- "$dir/tcpbench" -only '^pingpong.8B$' -o "$dir/one.out"
	else
		"$dir/xpu" run -n 2 -- "$dir/tcpbench" -only '^pingpong.8B$' -o "$dir/one.out"
	fi
	awk '{print $2}' "$dir/one.out" >>"$dir/$1"
	rm -f "$dir/one.out"
}
i=1
while [ "$i" -le "$rounds" ]; do
	if [ $((i % 2)) -eq 1 ]; then one on; one off; else one off; one on; fi
	i=$((i + 1))
done
echo "round  on (ns)  off (ns)  on/off"
paste "$dir/on" "$dir/off" | awk '{printf "%5d  %7.1f  %8.1f  %6.3f\n", NR, $1, $2, $1/$2}' | tee "$dir/rounds"
awk '{print $4}' "$dir/rounds" | sort -n | awk '{a[NR]=$1} END {
	m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2
	printf "median on/off %.3f, worst %.3f over %d rounds\n", m, a[NR], NR }'
