package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// StageInPieces returns c with staging in pieces turned on: on the
// communicator it returns, Allreduce, Reduce and Bcast of more than chunk
// bytes run as one collective per piece of chunk bytes (rounded down to
// whole elements), and a buffer the host cannot touch is staged piece by
// piece, the copies of the pieces before and after overlapping the
// collective on the one between, in three stand-ins of a piece each
// rather than one of the whole buffer (see Device memory in the package
// documentation). Ranks whose buffers are host memory run the same
// pieces, with no copy, so ranks may still mix memory kinds.
//
// Every rank of c calls it, with the same chunk: it is a collective,
// which checks that they agree. A chunk that is not positive, or that
// differs between ranks, fails it on every rank with an error matching
// ErrInvalidArgument that names each rank's chunk.
//
// The communicator returned is a view of c: it has c's rank, size, and
// every capability found through As (its Unwrap returns c), and Close
// closes c. Calls on c itself stage whole buffers as before. Each piece
// goes to c's native collective, when it has one, as its own call: a
// native collective that takes device memory whole (NCCL) gains nothing
// from pieces.
func StageInPieces(ctx context.Context, c Comm, chunk int) (Comm, error) {
	const name = "stage-in-pieces"
	p, _, err := checkComm(ctx, c, name)
	if err != nil {
		return nil, err
	}
	mine := make([]byte, 8)
	binary.LittleEndian.PutUint64(mine, uint64(int64(chunk)))
	all := make([]byte, 8*p)
	if err := AllgatherBlock(ctx, c, hostBlock(mine), hostBlock(all)); err != nil {
		return nil, xerr.Op(stageName, name, fmt.Errorf("comparing the ranks' chunks: %w", err))
	}
	chunks := make([]int64, p)
	agree := true
	for r := range chunks {
		chunks[r] = int64(binary.LittleEndian.Uint64(all[8*r:]))
		agree = agree && chunks[r] == chunks[0] && chunks[r] > 0
	}
	if !agree {
		return nil, xerr.Op(stageName, name, piecesErr(chunks))
	}
	return &piecesComm{Comm: c, chunk: chunk}, nil
}

// piecesErr says which chunks the ranks asked for, when they disagree or
// one is not positive.
func piecesErr(chunks []int64) error {
	var b strings.Builder
	for r, k := range chunks {
		if r > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "rank %d: %d", r, k)
	}
	return xerr.Detail(ErrInvalidArgument, "every rank must ask for the same positive chunk (%s)", b.String())
}

// hostBlock views b, Go memory.
func hostBlock(b []byte) memspace.Block {
	buf, err := memspace.FromSlice(b)
	if err != nil {
		panic(err) // []byte is always a valid element type
	}
	return buf.Block()
}

// piecesComm is the communicator StageInPieces returns: c, on which the
// element-wise collectives run in pieces of chunk bytes.
type piecesComm struct {
	Comm
	chunk int
}

// Unwrap returns the communicator StageInPieces was given.
func (w *piecesComm) Unwrap() Comm { return w.Comm }

// piecesOf returns the chunk of c's pieces: that of the first communicator
// StageInPieces returned in c's Unwrap chain, else 0 (whole buffers).
func piecesOf(c Comm) int {
	if w, ok := c.(*piecesComm); ok {
		return w.chunk
	}
	if _, ok := c.(Unwrapper); !ok {
		return 0
	}
	if w, ok := As[*piecesComm](c); ok {
		return w.chunk
	}
	return 0
}
