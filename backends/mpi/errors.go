//go:build mpi

package mpi

import (
	"fmt"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/xerr"
)

// Error is an error code returned by MPI, with MPI's own description
// (MPI_Error_string) and class (MPI_Error_class). It matches the sentinel of
// its class under errors.Is: comm.ErrTruncated for MPI_ERR_TRUNCATE,
// comm.ErrInvalidArgument for bad ranks, tags, counts, types, ops, roots
// and arguments, comm.ErrPeerLost for the process-failure classes of MPI
// implementations with fault tolerance (ULFM), comm.ErrNotSupported for
// unsupported operations. It reaches users wrapped in an *xerr.Error that
// names the operation.
type Error struct {
	Code  int    // the MPI error code
	Class int    // its MPI error class
	Msg   string // MPI_Error_string of the code
	kind  error
}

func (e *Error) Error() string {
	if e.kind != nil {
		return fmt.Sprintf("%s (MPI error %d, class %d): %v", e.Msg, e.Code, e.Class, e.kind)
	}
	return fmt.Sprintf("%s (MPI error %d, class %d)", e.Msg, e.Code, e.Class)
}

// Unwrap returns the sentinel the error's class maps to, or nil.
func (e *Error) Unwrap() error { return e.kind }

// mpiError turns an MPI return code of operation op into an error (nil
// for MPI_SUCCESS, without a call).
func mpiError(op string, rc int) error {
	if rc == 0 {
		return nil
	}
	return mpiErrorOf(op, rc)
}

func mpiErrorOf(op string, rc int) error {
	lock()
	defer unlock()
	return rcError(op, rc)
}

// rcError is mpiError for callers that serialise MPI calls already.
func rcError(op string, rc int) error {
	if rc == 0 {
		return nil
	}
	msg, class, cl := cErrorString(rc), cErrorClass(rc), cClassify(rc)
	e := &Error{Code: rc, Class: class, Msg: msg}
	switch cl {
	case classTruncate:
		e.kind = comm.ErrTruncated
	case classArg:
		e.kind = comm.ErrInvalidArgument
	case classPeer:
		e.kind = comm.ErrPeerLost
	case classUnsupported:
		e.kind = comm.ErrNotSupported
	}
	return xerr.Op(Name, op, e)
}

// errClosed is the error of an operation on a closed communicator.
func errClosed(op string) error {
	return xerr.Errorf(Name, op, comm.ErrClosed, "communicator closed")
}
