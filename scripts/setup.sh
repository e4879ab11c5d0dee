#!/usr/bin/env bash
# Installs what building and testing xpu needs on a Debian machine that has Go:
# a C toolchain (the race detector and the C benchmark references need it),
# and what the RDMA tests need (see below).
# Idempotent: installs only what is missing. Needs root (or sudo) to install.
set -euo pipefail

need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# Network namespaces, veth and packet filters for the TCP backend's link-cut
# and packet-loss tests (they skip, saying why, where these are missing).
{ command -v ip && command -v rdma; } >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
# clang's NVPTX back end: the cuda backend's built-in kernels are PTX compiled
# from backends/cuda/internal/kernels/*.cu, and a test checks the committed
# PTX is what the source compiles to (it skips, saying why, without clang).
command -v clang-14 >/dev/null 2>&1 || need+=(clang-14)
# The rdma backend: its cgo build needs rdma-core's headers, and its tests
# run on real kernel verbs (soft-RoCE) in a qemu guest (internal/tooling/rdmavm),
# which is built from a static busybox, the host's RDMA tools and
# references (perftest, ibverbs-utils, rdmacm-utils, the rxe provider), and
# Debian's kernel, unpacked with dpkg-deb, depmod and xz. qboot (in
# qemu-system-data) boots the guest faster.
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
[ -e /usr/share/qemu/qboot.rom ] || need+=(qemu-system-data)
# busybox-static, not busybox: the guest has no libc for it (ldd fails on
# a static binary).
{ b=$(command -v busybox) && ! ldd "$b"; } >/dev/null 2>&1 || need+=(busybox-static)
compgen -G '/usr/lib/*-linux-gnu/libibverbs/librxe-rdmav*.so' >/dev/null || need+=(ibverbs-providers)
command -v ibv_devinfo >/dev/null 2>&1 || need+=(ibverbs-utils)
command -v rping >/dev/null 2>&1 || need+=(rdmacm-utils)
command -v ib_send_lat >/dev/null 2>&1 || need+=(perftest)
command -v cpio >/dev/null 2>&1 || need+=(cpio)
{ command -v depmod || [ -x /usr/sbin/depmod ] || [ -x /sbin/depmod ]; } >/dev/null 2>&1 || need+=(kmod)
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
[ -e /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev)
[ -e /usr/include/rdma/rdma_cma.h ] || need+=(librdmacm-dev)
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
