// Command allreduce sums a vector across the ranks of a job and checks the
// result: the first program to run on more than one process.
//
//	xpu run -n 4 go run ./examples/allreduce   # four ranks on this machine
//	go run ./examples/allreduce                # one rank alone
//
// Every rank fills a vector of float64 in host memory with values that
// depend on its rank, the ranks add their vectors together with
// comm.Allreduce, and each checks the sum against its closed form and
// prints one line. It exits with status 1 when a sum is wrong or a step
// fails.
//
// The ranks talk over the "procs" backend, which finds its place in the job
// from the environment `xpu run` sets (XPU_RANK, XPU_WORLD_SIZE,
// XPU_MASTER_ADDR, XPU_MASTER_PORT, XPU_JOB_SECRET); the vectors live in the
// "cpu" backend's memory space. See docs/launching.md.
package main
