// Package rdmavm is the rdma backend's test harness; tooling, not shipped
// by the library. It boots a throw-away qemu guest with real kernel RDMA
// verbs and runs host-built binaries in it, for testing RDMA code on a
// machine whose kernel has none.
//
// The guest runs Debian's stock kernel (linux-image-amd64's, whose
// modules include rdma_rxe) with soft-RoCE: init loads the modules, adds
// a dummy network device with Addr and the rxe device Device on it, and
// waits until its port is active and its RoCE v2 GID (index GIDIndex) is
// there. Client and server of a test run in the same guest, on the same
// device, rdma_cm connecting to Addr. The guest has busybox, ip, rdma,
// rdma-core's libraries with the rxe provider, and the references of
// perftest, ibverbs-utils and rdmacm-utils under /usr/bin, all copied from
// the host; a job adds its own binaries, each with the libraries ldd
// lists for it:
//
//	res, err := rdmavm.Run(ctx, rdmavm.Job{
//		Files:  []rdmavm.File{{Host: "./rdmatest"}},
//		Script: "rdmatest -server & rdmatest -connect $XPU_RDMAVM_ADDR",
//		Output: os.Stdout,
//	})
//
// The kernel is emulated (qemu's TCG) unless EnvAccel says "kvm": a boot
// takes seconds, and RDMA runs at some tens of MB/s, so a test runs
// several binaries in one job rather than one job each. The job's output
// streams over a virtio-serial port to Job.Output; a second port carries
// init's progress and the script's exit status; the serial console holds
// kernel messages, which a *GuestError shows the end of.
//
// The image, a vmlinux taken out of the kernel package and a base
// initramfs, is built once into a cache (see Prepare); each Run appends a
// second archive with the job's files to a copy of it.
//
// Run may be called concurrently; each call boots its own guest. The
// package needs Linux on amd64 and the tools scripts/setup.sh installs;
// Available says what is missing.
package rdmavm
