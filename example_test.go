package xpu_test

import (
	"context"
	"fmt"

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

// An unknown name lists what is registered.
func ExampleOpen_unknown() {
	_, err := xpu.Open(context.Background(), "no-such-backend", nil)
	fmt.Println(err != nil)
	// Output: true
}
