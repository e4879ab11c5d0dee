// Command gpu is the GPU example: it allocates on a GPU, fills, runs axpy,
// reduces, copies back and checks every element against the host's
// arithmetic, with the backend chosen by name (XPU_BACKEND=cuda by
// default). On a machine without a usable GPU it says why and exits 0
// (exit status 2 with -require).
//
//	go run ./examples/gpu [-n 1048576] [-device 0] [-require]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/cuda"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/transfer"
)

func main() {
	n := flag.Int("n", 1<<20, "elements")
	device := flag.String("device", "0", "device index")
	require := flag.Bool("require", false, "fail (exit 2) when no GPU is usable")
	flag.Parse()
	if err := run(*n, *device); err != nil {
		if errors.Is(err, xpu.ErrUnavailable) && !*require {
			fmt.Printf("gpu example skipped: %v\n", err)
			return
		}
		fmt.Fprintf(os.Stderr, "gpu example: %v\n", err)
		os.Exit(2)
	}
}

func run(n int, device string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := xpu.Open(ctx, cuda.Name, xpu.Options{cuda.OptDevice: device})
	if err != nil {
		return err
	}
	defer b.Close()
	s, ok := executor.As[executor.Streamer](b.Exec)
	if !ok {
		return fmt.Errorf("the executor has no streams")
	}
	st, serr := s.NewStream()
	if serr != nil {
		return serr
	}
	defer st.Close()

	x, e1 := memspace.Alloc[float32](b.Memory, n)
	y, e2 := memspace.Alloc[float32](b.Memory, n)
	if err := errors.Join(e1, e2); err != nil {
		return err
	}
	defer x.Free()
	defer y.Free()
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(i % 1000)
	}
	hb, _ := memspace.FromSlice(host)
	start, _ := st.Record()
	if _, err := transfer.CopyAsync(st, x, hb); err != nil { // pageable memory, staged in stream order
		return err
	}
	if err := errors.Join(cuda.Fill(st, y, 1), cuda.Axpy(st, 2, x, y)); err != nil { // y = 2x + 1
		return err
	}
	sum, err := cuda.Sum(ctx, st, y)
	if err != nil {
		return err
	}
	mx, err := cuda.Max(ctx, st, y)
	if err != nil {
		return err
	}
	end, _ := st.Record()
	if err := transfer.Copy(ctx, hb, y); err != nil {
		return err
	}
	var want float64
	for i, v := range host {
		w := 2*float32(i%1000) + 1
		if v != w {
			return fmt.Errorf("element %d is %v, want %v", i, v, w)
		}
		want += float64(w)
	}
	if rel := (float64(sum) - want) / want; rel > 1e-4 || rel < -1e-4 {
		return fmt.Errorf("sum %v, want %v", sum, want)
	}
	if mx != 1999 {
		return fmt.Errorf("max %v, want 1999", mx)
	}
	d, _ := executor.Elapsed(start, end)
	fmt.Printf("gpu example: %d float32 on %s: copy, fill, axpy, sum %.6g, max %v, checked; device time %v\n",
		n, b.Memory.Name(), sum, mx, d)
	return nil
}
