#!/usr/bin/env bash
# Installs what building and testing xpu needs on a Debian machine that has Go:
# a C toolchain (the race detector and the C benchmark references need it).
# Idempotent: installs only what is missing. Needs root (or sudo) to install.
set -euo pipefail

need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# Network namespaces, veth and packet filters for the TCP backend's link-cut
# and packet-loss tests (they skip, saying why, where these are missing).
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
# clang's NVPTX back end: the cuda backend's built-in kernels are PTX compiled
# from backends/cuda/internal/kernels/*.cu, and a test checks the committed
# PTX is what the source compiles to (it skips, saying why, without clang).
command -v clang-14 >/dev/null 2>&1 || need+=(clang-14)
# OpenMP runtime for the C references of `make bench`.
if command -v gcc >/dev/null 2>&1 && ! echo 'int main(){return 0;}' | gcc -fopenmp -x c -o /dev/null - >/dev/null 2>&1; then
  need+=(libgomp1)
fi

if [ "${#need[@]}" -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root to install ${need[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

go mod download
