package comm

import (
	"fmt"

	"github.com/xpu-go/xpu/impl"
	"github.com/xpu-go/xpu/memspace"
)

// ReduceLocal computes dst[i] = a[i] op b[i] element-wise over elements of
// dt held in host-accessible blocks of equal length. dst may be a or b (the
// same block), but must not overlap them partially. The blocks need not be
// aligned for dt.
//
// Deprecated: it is for implementers of backends: use impl.ReduceBytes on
// the blocks' bytes.
func ReduceLocal(dst, a, b memspace.Block, dt DType, op Op) error {
	if err := op.Check(dt); err != nil {
		return err
	}
	n := dst.Len()
	if a.Len() != n || b.Len() != n {
		return fmt.Errorf("comm: reduce of blocks of %d, %d and %d bytes: %w", dst.Len(), a.Len(), b.Len(), ErrInvalidArgument)
	}
	if n%dt.Size() != 0 {
		return fmt.Errorf("comm: %d-byte block is not a whole number of %v: %w", n, dt, ErrInvalidArgument)
	}
	for _, x := range []memspace.Block{a, b} {
		if !sameBlock(x, dst) && memspace.Overlaps(x, dst) {
			return fmt.Errorf("comm: reduce into %v partially overlapping operand %v: %w", dst, x, ErrInvalidArgument)
		}
	}
	d, err := hostBytes(dst)
	if err != nil {
		return err
	}
	x, err := hostBytes(a)
	if err != nil {
		return err
	}
	y, err := hostBytes(b)
	if err != nil {
		return err
	}
	reduceBytes(d, x, y, dt, op)
	return nil
}

// ReduceBytes is ReduceLocal on host bytes.
//
// Deprecated: it is for implementers of backends: use impl.ReduceBytes.
func ReduceBytes(dst, a, b []byte, dt DType, op Op) error {
	if err := impl.ReduceBytes(dst, a, b, dt, op); err != nil {
		return fmt.Errorf("comm: %w", err)
	}
	return nil
}

// sameBlock reports whether a and b are the same region (in place).
func sameBlock(a, b memspace.Block) bool {
	return a.Addr() == b.Addr() && a.Len() == b.Len() && a.HostPointer() == b.HostPointer() && memspace.Overlaps(a, b)
}

// hostBytes returns the host view of b, or an error matching
// ErrNotSupported for memory the host cannot touch.
func hostBytes(b memspace.Block) ([]byte, error) {
	if b.Len() == 0 {
		return nil, nil
	}
	p, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("comm: the shared collective algorithms need host-accessible memory (%w): %w", err, ErrNotSupported)
	}
	return p, nil
}

// reduceBytes computes dst = a op b over elements of dt, checked (the
// kernels are impl's, shared with the backends).
func reduceBytes(dst, a, b []byte, dt DType, op Op) {
	_ = impl.ReduceBytes(dst, a, b, dt, op)
}
