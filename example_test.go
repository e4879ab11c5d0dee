package xpu_test

import (
	"context"
	"fmt"
	"os"

	"github.com/xpu-go/xpu"
	_ "github.com/xpu-go/xpu/backends/cpu" // registers "cpu"
	"github.com/xpu-go/xpu/memspace"
)

// Open a backend by name and allocate typed memory in its default space.
func ExampleOpen() {
	ctx := context.Background()
	b, err := xpu.Open(ctx, "cpu", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	buf, err := memspace.Alloc[float32](b.Memory, 1024)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer buf.Free()
	x, _ := buf.Host()
	x[0] = 1.5
	fmt.Println(b.Name, buf.Len(), b.Memory.Properties().HostAccessible, x[0])
	// Output: cpu 1024 true 1.5
}

// An unknown name is an error that suggests the nearest name and lists
// every known one; a backend of this module that the program does not link
// is an error that says which import links it.
func ExampleOpen_unknown() {
	_, err := xpu.Open(context.Background(), "cdua", nil)
	fmt.Println(err)
	_, err = xpu.Open(context.Background(), "cuda", nil)
	fmt.Println(err)
	// Output:
	// xpu open: unknown backend "cdua" (did you mean cuda?); known: cpu, cuda, local, mpi, procs, rdma, tcp
	// xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"
}

// Open takes a chain where it takes a name: the first candidate that opens
// is chosen, and the Backend's Selection says why the others were skipped.
func ExampleOpen_chain() {
	b, err := xpu.Open(context.Background(), "cuda,cpu", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	fmt.Println(b.Name)
	fmt.Println(b.Selection)
	// Output:
	// cpu
	// xpu: opened cpu of the chain cuda,cpu (named by the caller); skipped: xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"
}

// OpenDefault tries the chain XPU_BACKEND names, else the default one
// (or, in a rank of a job of several ranks, the backends with a
// communicator); the Backend's Selection says which it chose and why.
func ExampleOpenDefault() {
	defer os.Setenv(xpu.EnvBackend, os.Getenv(xpu.EnvBackend))
	os.Setenv(xpu.EnvBackend, "cuda,cpu")

	b, skipped, err := xpu.OpenDefault(context.Background(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	fmt.Println(b.Name, len(skipped))
	fmt.Println(b.Selection)

	os.Setenv(xpu.EnvBackend, "cdua,cpu") // a typo never falls back
	_, _, err = xpu.OpenDefault(context.Background(), nil)
	fmt.Println(err)
	// Output:
	// cpu 1
	// xpu: opened cpu of the chain cuda,cpu (from XPU_BACKEND); skipped: xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"
	// xpu open: XPU_BACKEND="cdua,cpu": unknown backend "cdua" (did you mean cuda?); known: cpu, cuda, local, mpi, procs, rdma, tcp
}
