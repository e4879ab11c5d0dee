// Command pagedcache moves pages of a cache between two processes with
// one-sided transfers: rank 0 keeps a pool of fixed-size pages (a stand-in
// for a KV cache) and exposes it; rank 1 pulls a scattered list of them
// with one prepared batch of Gets, changes them, and writes them back to
// other slots of the pool with one batch of Puts. Rank 0 takes no part in
// the transfers: it learns that its pages were written back from a message
// rank 1 sends after flushing its Puts, and checks every page.
//
//	xpu run -n 2 go run ./examples/pagedcache                 # shared memory between the ranks
//	XPU_LINKS=tcp xpu run -n 2 go run ./examples/pagedcache   # over TCP
//	go run ./examples/pagedcache                              # both ranks in this process
//
// Each rank prints one line and the program exits with status 1 when a
// page is wrong or a step fails. Any communicator that implements
// comm.OneSided runs it; the pool lives in the "cpu" backend's memory.
package main
