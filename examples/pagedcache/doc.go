// Command pagedcache moves pages of a cache between two processes with
// one-sided transfers: rank 0 keeps a pool of fixed-size pages (a stand-in
// for a KV cache) and exposes it; rank 1 pulls a scattered list of them
// with one prepared batch of Gets, changes them, and writes them back to
// other slots of the pool with one batch of Puts posted with a
// notification. Rank 0 takes no part in the transfers: the notification
// tells it that its pages were written back, and it checks every page.
//
//	xpu run -n 2 go run ./examples/pagedcache                 # shared memory between the ranks
//	XPU_LINKS=tcp xpu run -n 2 go run ./examples/pagedcache   # over TCP
//	go run ./examples/pagedcache                              # both ranks in this process
//	go build -tags mpi ./examples/pagedcache && XPU_BACKEND=mpi mpirun -np 2 ./pagedcache
//
// Each rank prints one line and the program exits with status 1 when a
// page is wrong or a step fails. XPU_BACKEND names the communicator
// (procs when unset); any that implements comm.Notifier runs it. The
// pool lives in the "cpu" backend's memory, or with PAGEDCACHE_POOL=cuda
// in a GPU's device memory, which the host cannot touch: procs and local
// copy the pages into and out of it with the driver (rdma and mpi refuse
// such a pool with an error that says so).
//
//	PAGEDCACHE_POOL=cuda xpu run -n 2 go run ./examples/pagedcache
package main
