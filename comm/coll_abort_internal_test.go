package comm

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

// neverReq never completes, whatever Cancel says.
type neverReq struct{}

func (neverReq) Wait(ctx context.Context) (Status, error) { <-ctx.Done(); return Status{}, ctx.Err() }
func (neverReq) Test() (Status, bool, error)              { return Status{}, false, nil }
func (neverReq) Cancel() error                            { return nil }

// doneReq has completed.
type doneReq struct{}

func (doneReq) Wait(context.Context) (Status, error) { return Status{}, nil }
func (doneReq) Test() (Status, bool, error)          { return Status{}, true, nil }
func (doneReq) Cancel() error                        { return nil }

// A collective aborted while one of its requests cannot be settled must
// not recycle its scratch memory, which that request may still use.
func TestAbortKeepsScratchOfUnsettledRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &inflight{}
		f.alloc(64)
		f.reqs = []Request{doneReq{}, neverReq{}}
		f.abort()
		assert.Nil(t, f.reqs)
		assert.Nil(t, f.scratch, "scratch an unsettled request may use is left to the garbage collector")
	})
	synctest.Test(t, func(t *testing.T) {
		f := &inflight{}
		f.alloc(64)
		f.reqs = []Request{doneReq{}}
		f.abort()
		assert.Len(t, f.scratch, 1, "scratch of settled requests is kept for release to recycle")
		f.release()
	})
}
