#!/usr/bin/env bash
# Installs the Debian packages a make target needs, and no others, on a
# machine that has Go (the version go.mod names), then downloads the Go
# modules. A profile names a target's needs (docs/setup.md lists them):
#
#   demo   make demo, and every target that builds xpu or a C reference
#   bench  make bench: demo's (its MPI references install through
#          scripts/setup-mpi.sh, which those targets call)
#   test   make test: demo's, and the tools of the tests that skip without
#          them: network namespaces, the GPU kernels' compiler, the RDMA guest
#   rdma   make bench-rdma: demo's and the RDMA guest's
#   chaos  make chaos: demo's and network namespaces
#
# Packages already installed are skipped; apt-get update runs once, and only
# when something is missing. Needs root (or sudo) to install.
#
# Usage: scripts/setup.sh [--list] [PROFILE...]   (default profile: test)
#   --list  prints the profiles' packages, one a line, and installs nothing
set -euo pipefail

# The package groups, one package a line, each with what needs it (a test,
# internal/tooling's TestSetupProfiles, checks that every one says).

# Building xpu and the C references, the race detector, cgo.
build=(
  gcc       # make refs: gcc -O3 -fopenmp builds internal/tooling/bench/ref/*.c; cgo (examples/gpu, backends/cuda)
  libc6-dev # the C library's headers, and libdl for cuda_ref.c (-ldl)
  libgomp1  # the OpenMP runtime cpu_ref.c links (-fopenmp)
)

# Network namespaces, veth and packet filters: the procs backend's link-cut
# and packet-loss tests (backends/procs/netns_linux_test.go) and make chaos;
# the tests skip, saying why, without them.
netns=(
  iproute2 # ip netns, ip link: the namespaces and their veth links
  iptables # the packet filters that cut or drop a link inside a namespace
)

# The GPU kernels: backends/cuda/internal/kernels' test checks that the
# committed PTX is what its .cu sources compile to (it skips without).
kernels=(
  clang-14 # clang's NVPTX back end, the compiler ptxgen runs
)

# The RDMA guest (internal/tooling/rdmavm): backends/rdma's TestGuest builds
# the tests with -tags rdma and runs them on soft-RoCE in a qemu guest made
# from a static busybox, the host's RDMA tools and Debian's kernel.
rdma=(
  libibverbs-dev    # the rdma backend's cgo build (-tags rdma): infiniband/verbs.h
  librdmacm-dev     # the same: rdma/rdma_cma.h
  qemu-system-x86   # runs the guest
  qemu-system-data  # qboot.rom, a firmware that boots the guest's kernel faster
  busybox-static    # the guest's shell and tools (static: the guest has no libc for busybox)
  ibverbs-providers # librxe, the soft-RoCE provider copied into the guest
  ibverbs-utils     # ibv_devinfo, ibv_rc_pingpong: the guest's RDMA checks
  rdmacm-utils      # rping: the guest's connection-manager check
  perftest          # ib_send_lat and the others: make bench-rdma's references
  kmod              # depmod, modprobe: the guest's kernel modules
  xz-utils          # xz: unpacks the kernel and its compressed modules
  cpio              # rdmavm's cpio test reads the guest's archive back with it
)

# groups prints the groups of a profile.
groups() {
  case "$1" in
    demo | bench) echo build ;;
    test) echo build netns kernels rdma ;;
    rdma) echo build rdma ;;
    chaos) echo build netns ;;
    *)
      echo "setup: unknown profile $1 (want demo, bench, test, rdma or chaos)" >&2
      return 2
      ;;
  esac
}

list=0
profiles=()
for a in "$@"; do
  case "$a" in
    --list) list=1 ;;
    *) profiles+=("$a") ;;
  esac
done
[ "${#profiles[@]}" -gt 0 ] || profiles=(test)

pkgs=()
for p in "${profiles[@]}"; do
  gs=$(groups "$p") || exit 2
  for g in $gs; do
    declare -n group="$g"
    for pkg in "${group[@]}"; do
      [[ " ${pkgs[*]} " == *" $pkg "* ]] || pkgs+=("$pkg")
    done
    unset -n group
  done
done

if [ "$list" -eq 1 ]; then
  printf '%s\n' "${pkgs[@]}"
  exit 0
fi

# What is missing: one dpkg-query for every package (it names those it
# knows, installed or not; an unknown one is missing too).
need=()
installed=" $({ dpkg-query -W -f='${Package}:${db:Status-Abbrev}\n' "${pkgs[@]}" 2>/dev/null || true; } | sed -n 's/:ii *$//p' | tr '\n' ' ') "
for pkg in "${pkgs[@]}"; do
  [[ "$installed" == *" $pkg "* ]] || need+=("$pkg")
done

if [ "${#need[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: missing ${need[*]} and no apt-get here: install them by hand (docs/setup.md says what needs each)" >&2
    exit 1
  fi
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root to install ${need[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "setup (${profiles[*]}): installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

go mod download
