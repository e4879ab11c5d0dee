//go:build mpi

package mpi

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/xerr"
)

// The process-wide MPI state. MPI is initialised once, by the first Open,
// on a goroutine locked to its OS thread (MPI's "main thread"), which later
// finalises it when the last communicator is freed. MPI cannot be
// initialised again after that.
//
// Lock order: lib.mu, then a request's mu, then callMu.
var lib struct {
	mu       sync.Mutex
	state    libState
	initDone chan struct{} // closed when initialisation has finished
	initErr  error
	own      bool          // this package initialised MPI and finalises it
	comms    int           // communicators not yet freed
	finalize chan struct{} // asks the main thread to finalise
	finished chan int      // its MPI_Finalize return code
	asked    ThreadLevel
	provided ThreadLevel
}

type libState int

const (
	libNever libState = iota
	libStarting
	libUp
	libDown
)

// serial is set when every MPI call must be serialised behind callMu
// (thread level below MPI_THREAD_MULTIPLE). It is written before initDone
// is closed and read only after.
var (
	serial bool
	callMu sync.Mutex
)

// lock and unlock bracket every MPI call when calls are serialised.
func lock() {
	if serial {
		callMu.Lock()
	}
}

func unlock() {
	if serial {
		callMu.Unlock()
	}
}

// alive guards the calls made on requests, which may outlive their
// communicator: they hold it for reading and check finalized; finalisation
// holds it for writing.
var (
	alive     sync.RWMutex
	finalized atomic.Bool
)

// initMPI initialises MPI asking for level, once per process, and waits
// for it honouring ctx (initialisation goes on in the background when ctx
// ends first). Every call after the first returns the first's result.
func initMPI(ctx context.Context, level ThreadLevel) error {
	lib.mu.Lock()
	switch lib.state {
	case libDown:
		lib.mu.Unlock()
		return xerr.Errorf(Name, "init", xerr.ErrUnavailable, "MPI was finalized when the last communicator of this process closed, and MPI cannot be initialised twice")
	case libNever:
		lib.state = libStarting
		lib.asked = level
		lib.initDone = make(chan struct{})
		lib.finalize = make(chan struct{})
		lib.finished = make(chan int, 1)
		go mainThread(level)
	}
	done := lib.initDone
	lib.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return xerr.Op(Name, "init", ctx.Err())
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return lib.initErr
}

// mainThread initialises MPI on a locked OS thread, and finalises it there
// when asked. When MPI was already initialised (by another library of the
// process) it adopts it and leaves finalisation to its owner.
func mainThread(level ThreadLevel) {
	runtime.LockOSThread()
	var (
		provided ThreadLevel
		rc       int
		own      bool
	)
	if cInitialized() {
		provided = cQueryThread()
	} else {
		provided, rc = cInit(level)
		own = true
	}
	lib.mu.Lock()
	lib.own = own
	lib.provided = provided
	if rc != 0 {
		lib.initErr = xerr.Errorf(Name, "init", xerr.ErrUnavailable, "MPI_Init_thread failed with code %d", rc)
		lib.state = libDown
	} else {
		lib.state = libUp
		serial = level < ThreadMultiple || provided < ThreadMultiple
		quirks = quirksOf(LibraryVersion())
		reservedComms = reservedFor(cTagUB(cWorld()))
	}
	close(lib.initDone)
	lib.mu.Unlock()
	if rc != 0 || !own {
		runtime.UnlockOSThread()
		return
	}
	<-lib.finalize
	lib.finished <- cFinalize()
	// The goroutine ends locked: its thread, which MPI knew, ends with it.
}

// acquireLib counts a new communicator. MPI must be up.
func acquireLib() error {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.state != libUp {
		return xerr.Errorf(Name, "open", xerr.ErrClosed, "MPI is not initialised")
	}
	lib.comms++
	return nil
}

// releaseLib forgets a freed communicator; the last one finalises MPI.
// MPI_Finalize is collective over the job: it returns once every process
// has finalised.
func releaseLib() error {
	lib.mu.Lock()
	lib.comms--
	last := lib.comms == 0 && lib.state == libUp
	if last {
		lib.state = libDown
	}
	own := lib.own
	lib.mu.Unlock()
	if !last {
		return nil
	}
	// Requests nobody waits for any more get a last chance to complete.
	sweepOrphans(time.Second)
	alive.Lock()
	finalized.Store(true)
	alive.Unlock()
	if !own {
		return nil
	}
	close(lib.finalize)
	if rc := <-lib.finished; rc != 0 {
		return xerr.Errorf(Name, "finalize", xerr.ErrUnavailable, "MPI_Finalize failed with code %d", rc)
	}
	return nil
}

// Provided returns the thread level MPI granted, and false when MPI is not
// (or no longer) initialised by this package.
func Provided() (ThreadLevel, bool) {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return lib.provided, lib.state == libUp
}

// LibraryVersion returns the MPI library's version string (the first line
// of MPI_Get_library_version, which MPI answers even before
// initialisation).
func LibraryVersion() string {
	v := cLibraryVersion()
	for i := 0; i < len(v); i++ {
		if v[i] == '\n' {
			return v[:i]
		}
	}
	return v
}

// quirks are the defects of MPI libraries this package works around. Like
// serial, they are set before initDone is closed.
var quirks quirkSet

type quirkSet struct {
	// reduceInPlace: MPI_Reduce with MPI_IN_PLACE at the root crashes for
	// larger counts (MPICH 4.0 with the ch4:ucx device); reduce from a copy.
	reduceInPlace bool
	// selfBlocking: blocking MPI_Send and MPI_Recv between a process and
	// itself, from several threads at once, can hang for good (MPICH 4.0
	// with ch4:ucx); messages to or from self go through the nonblocking
	// path instead.
	selfBlocking bool
}

func quirksOf(version string) quirkSet {
	mpich := strings.HasPrefix(version, "MPICH")
	return quirkSet{reduceInPlace: mpich, selfBlocking: mpich}
}

// reservedComms is how many communicators carry the reserved tags, set
// like serial: enough for the 2^30 reserved tags at MPI_TAG_UB+1 tags
// each, at most maxReservedComms (reserved tags beyond are refused).
var reservedComms = 1

const maxReservedComms = 16

func reservedFor(tagUB int) int {
	span := int64(tagUB) + 1
	need := (int64(comm.MaxReservedTag-comm.MaxTag) + span - 1) / span
	return int(min(max(need, 1), maxReservedComms))
}
