//go:build cgo

package cuda_test

import (
	"context"
	"fmt"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

// Allocate on the GPU, fill, axpy, reduce, copy back.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := xpu.Open(ctx, cuda.Name, nil) // device 0
	if err != nil {
		fmt.Println(err) // xpu.ErrUnavailable with the reason on a machine without a GPU
		return
	}
	defer b.Close()
	st, _ := b.Exec.(executor.Streamer).NewStream()
	defer st.Close()

	x, _ := memspace.Alloc[float32](b.Memory, 1000)
	y, _ := memspace.Alloc[float32](b.Memory, 1000)
	defer x.Free()
	defer y.Free()
	_ = cuda.Fill(st, x, 2)
	_ = cuda.Fill(st, y, 1)
	_ = cuda.Axpy(st, 3, x, y) // y = 3x + y = 7
	sum, err := cuda.Sum(ctx, st, y)
	if err != nil {
		fmt.Println(err)
		return
	}
	host := make([]float32, 1000)
	hb, _ := memspace.FromSlice(host)
	_ = transfer.Copy(ctx, hb, y)
	fmt.Println(sum, host[0], host[999])
	// Output: 7000 7 7
}

// A kernel of one's own: PTX text, loaded, found by name, launched with a
// typed argument list on a stream.
func ExampleFunction_Launch() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := xpu.Open(ctx, cuda.Name, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	x := b.Exec.(*cuda.Executor)
	st, _ := x.NewStream()
	defer st.Close()
	m, err := x.LoadModule(ptx) // PTX text, e.g. from nvcc -ptx or clang
	if err != nil {
		fmt.Println(err) // the JIT's log, on one line
		return
	}
	defer m.Close()
	iota, _ := m.Function("xpu_test_iota_u32")
	buf, _ := memspace.Alloc[uint32](b.Memory, 256)
	defer buf.Free()
	err = iota.Launch(st, cuda.Config{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 256}}, buf, uint64(256))
	if err != nil {
		fmt.Println(err)
		return
	}
	max, _ := cuda.Max(ctx, st, buf)
	fmt.Println(max)
	// Output: 255
}
