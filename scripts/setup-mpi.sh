#!/usr/bin/env bash
# Installs what building and testing backends/mpi needs on a Debian or
# Ubuntu machine: Open MPI's headers, library and launcher, and pkg-config
# (the cgo build finds mpi.h through `pkg-config ompi-c`). With --mpich (or
# XPU_MPI=mpich) it installs MPICH beside it (`pkg-config mpich`, build tags
# "mpi mpich", launcher mpirun.mpich); Debian's alternatives keep both.
#
# Idempotent: installs only what is missing. Needs root (or sudo) to install.
# Usage: scripts/setup-mpi.sh [--mpich]
set -euo pipefail

flavor="${XPU_MPI:-openmpi}"
for a in "$@"; do
  case "$a" in
    --mpich) flavor=mpich ;;
    --openmpi) flavor=openmpi ;;
    *) echo "setup-mpi: unknown argument $a (want --mpich or --openmpi)" >&2; exit 2 ;;
  esac
done

need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
case "$flavor" in
  openmpi)
    pkg-config --exists ompi-c 2>/dev/null || need+=(libopenmpi-dev)
    { command -v mpirun.openmpi >/dev/null 2>&1 || command -v mpirun >/dev/null 2>&1; } || need+=(openmpi-bin)
    ;;
  mpich)
    pkg-config --exists mpich 2>/dev/null || need+=(libmpich-dev)
    command -v mpirun.mpich >/dev/null 2>&1 || need+=(mpich)
    ;;
  *) echo "setup-mpi: unknown MPI $flavor (want openmpi or mpich)" >&2; exit 2 ;;
esac

if [ "${#need[@]}" -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-mpi: missing ${need[*]} and no apt-get here: install $flavor's development files and pkg-config by hand" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup-mpi: need root to install ${need[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup-mpi: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
