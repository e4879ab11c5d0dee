//go:build mpi

package mpi_test

import (
	"fmt"
	"testing"

	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
)

// TestSPMDConformance runs the communicator conformance suite with this
// process's rank of the world communicator, as every rank of the job.
func TestSPMDConformance(t *testing.T) {
	c := rank(t)
	opts := []conformance.Option{
		// The case cancels a rendezvous send nobody receives yet and wants
		// Wait to return promptly; the receive side of Cancel is checked by
		// TestSPMDPointToPoint/cancel.
		conformance.Declare("comm/p2p/cancel",
			"MPI does not cancel a send once started here (Open MPI's ob1 never does, nor MPICH over UCX): "+
				"Wait after Cancel returns only once the receiver takes the message"),
		// Altered keys are refused (TestSPMDOneSided/forged-keys checks
		// them); a key of a closed region passes every check the origin
		// can make alone.
		conformance.Declare("comm/onesided/stale-keys",
			"MPI cannot refuse a transfer to memory its target detached (it is erroneous in MPI), and the origin "+
				"cannot tell a closed region from an open one without asking the target: see ADR 35"),
	}
	if ub := c.TagUB(); ub < comm.MaxTag {
		// The case sends with tag comm.MaxTag, above MPICH's MPI_TAG_UB
		// (2^28-1); TestSPMDPointToPoint checks that such tags are refused.
		opts = append(opts, conformance.Declare("comm/p2p/any-tag", fmt.Sprintf(
			"this MPI carries user tags up to MPI_TAG_UB = %d, below comm.MaxTag", ub)))
	}
	conformance.TestCommRank(t, c, opts...)
}
