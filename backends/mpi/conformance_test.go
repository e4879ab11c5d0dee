//go:build mpi

package mpi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xpu-go/xpu/backends/mpi"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/conformance"
)

// TestSPMDConformance runs the communicator conformance suite with this
// process's rank of the world communicator, as every rank of the job.
func TestSPMDConformance(t *testing.T) {
	c := rank(t)
	var opts []conformance.Option
	if strings.HasPrefix(mpi.LibraryVersion(), "Open MPI") {
		// The case cancels a rendezvous send nobody receives yet and wants
		// Wait to return promptly; its receive-side checks are in
		// TestSPMDPointToPoint/cancel.
		opts = append(opts, conformance.Declare("comm/p2p/cancel",
			"Open MPI never cancels a send (MPI_Cancel of a send is a no-op in its ob1 PML): "+
				"Wait after Cancel returns only once the receiver takes the message"))
	}
	if ub := c.TagUB(); ub < comm.MaxTag {
		// The case sends with tag comm.MaxTag, above MPICH's MPI_TAG_UB
		// (2^28-1); TestSPMDPointToPoint checks that such tags are refused.
		opts = append(opts, conformance.Declare("comm/p2p/any-tag", fmt.Sprintf(
			"this MPI carries user tags up to MPI_TAG_UB = %d, below comm.MaxTag", ub)))
	}
	conformance.TestCommRank(t, c, opts...)
}
