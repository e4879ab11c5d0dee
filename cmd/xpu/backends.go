package main

// The backends this command knows. A third-party backend is added by
// building a command of its own that imports it beside these.
import (
	_ "github.com/xpu-go/xpu/backends/cpu"
	_ "github.com/xpu-go/xpu/backends/cuda"
	_ "github.com/xpu-go/xpu/backends/local"
	_ "github.com/xpu-go/xpu/backends/mpi"
	_ "github.com/xpu-go/xpu/backends/procs"
	_ "github.com/xpu-go/xpu/backends/rdma"
)
