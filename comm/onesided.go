package comm

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

// One-sided communication. A rank exposes a block of its memory; the
// others read and write it with Get and Put, without the exposing rank
// taking part — RDMA READ and WRITE. It is UCX's ucp_mem_map with its
// remote keys, and MPI's windows with MPI_Put, MPI_Get and
// MPI_Win_flush, in Go's shape: a Region per exposed block, a RemoteKey
// that names it to the other ranks (exchanged through the communicator),
// a Request per transfer, and Flush to wait for every transfer to a rank.

// RemoteKey names a Region of one rank's memory to the other ranks of its
// communicator. Its fields are the backend's: a key is made by Expose,
// travels as bytes (MarshalBinary, ExchangeKeys) and is used unchanged.
type RemoteKey struct {
	Rank int    // the rank whose memory it is
	Addr uint64 // where the region starts, in that rank's terms
	Len  int    // its length in bytes
	Key  uint64 // the backend's access key (an RDMA rkey)
}

// RemoteKeySize is the length of an encoded RemoteKey.
const RemoteKeySize = 32

// MarshalBinary encodes k in RemoteKeySize bytes.
func (k RemoteKey) MarshalBinary() ([]byte, error) {
	b := make([]byte, RemoteKeySize)
	binary.LittleEndian.PutUint64(b[0:], uint64(k.Rank))
	binary.LittleEndian.PutUint64(b[8:], k.Addr)
	binary.LittleEndian.PutUint64(b[16:], uint64(k.Len))
	binary.LittleEndian.PutUint64(b[24:], k.Key)
	return b, nil
}

// UnmarshalBinary decodes a key MarshalBinary encoded.
func (k *RemoteKey) UnmarshalBinary(b []byte) error {
	if len(b) != RemoteKeySize {
		return xerr.Detail(ErrInvalidArgument, "a remote key is %d bytes, not %d", RemoteKeySize, len(b))
	}
	rank, n := binary.LittleEndian.Uint64(b[0:]), binary.LittleEndian.Uint64(b[16:])
	if rank > 1<<31 || n > 1<<62 {
		return xerr.Detail(ErrInvalidArgument, "a remote key of rank %d and %d bytes", rank, n)
	}
	*k = RemoteKey{Rank: int(rank), Addr: binary.LittleEndian.Uint64(b[8:]), Len: int(n), Key: binary.LittleEndian.Uint64(b[24:])}
	return nil
}

func (k RemoteKey) String() string {
	return fmt.Sprintf("rank %d region %#x+%d", k.Rank, k.Addr, k.Len)
}

// Region is a block exposed to the other ranks' Put and Get.
type Region interface {
	// Block is the exposed block.
	Block() memspace.Block
	// Key names the region to the other ranks.
	Key() RemoteKey
	// Close withdraws the region: the block is this rank's alone again.
	// Transfers on it must be over (a Put or Get that arrives afterwards
	// fails, and costs its rank the connection).
	Close() error
}

// OneSided is a communicator whose ranks read and write each other's
// exposed memory (RDMA). Its methods are safe for concurrent use.
//
// Put writes src into the region dst names, off bytes into it; Get reads
// from the region src names, off bytes into it, into dst. Each returns a
// Request that completes when the bytes are in place at the destination —
// in the target rank's memory for Put (src may then be reused), in dst for
// Get — or fails: ErrInvalidArgument for a key of no rank of the
// communicator or a range outside the region, ErrNotSupported for memory
// the backend cannot reach, ErrPeerLost when the rank is lost. Transfers
// are not ordered among themselves; Flush(ctx, rank) waits for every Put
// and Get this rank has started to rank (comm.AnySource: to every rank).
//
// The target learns of a Put only through a message: Flush (or wait for
// the Put), then Send; the message is received after the bytes are in
// place. Overlapping Puts, or a Put and a Get of the same bytes, that are
// not ordered by Flush leave those bytes undefined, as in MPI.
type OneSided interface {
	Comm
	// Expose makes buf reachable by the other ranks' Put and Get until the
	// Region is closed. buf may be memory the host cannot touch (a GPU's)
	// where the backend reaches it — local and procs copy into and out of
	// it with its space's copies, in pieces through host memory — and is
	// refused with ErrNotSupported where it does not.
	Expose(buf memspace.Block) (Region, error)
	Put(src memspace.Block, dst RemoteKey, off int) (Request, error)
	Get(dst memspace.Block, src RemoteKey, off int) (Request, error)
	Flush(ctx context.Context, rank int) error
}

// ExchangeKeys gives every rank every rank's key: keys[i] is rank i's
// mine. It is a collective (an Allgather): every rank calls it.
func ExchangeKeys(ctx context.Context, c Comm, mine RemoteKey) ([]RemoteKey, error) {
	if !validComm(c) {
		return nil, commErr(ctx, c, "ExchangeKeys")
	}
	if mine.Rank != c.Rank() {
		return nil, xerr.Detail(ErrInvalidArgument, "comm: ExchangeKeys: rank %d offers a key of rank %d", c.Rank(), mine.Rank)
	}
	b, _ := mine.MarshalBinary()
	all := make([]byte, RemoteKeySize*c.Size())
	sb, err := memspace.FromSlice(b)
	if err != nil {
		return nil, err
	}
	rb, err := memspace.FromSlice(all)
	if err != nil {
		return nil, err
	}
	if err := Allgather(ctx, c, sb, rb); err != nil {
		return nil, err
	}
	keys := make([]RemoteKey, c.Size())
	for i := range keys {
		if err := keys[i].UnmarshalBinary(all[i*RemoteKeySize : (i+1)*RemoteKeySize]); err != nil {
			return nil, fmt.Errorf("comm: ExchangeKeys: rank %d's key: %w", i, err)
		}
		if keys[i].Rank != i {
			return nil, xerr.Detail(ErrInvalidArgument, "comm: ExchangeKeys: rank %d sent a key of rank %d", i, keys[i].Rank)
		}
	}
	return keys, nil
}
