// Command xpu-arena is the xpu command with the arena backend linked in:
// what a backend author builds, in the backend's own module, to run `xpu
// conformance` (and `xpu info`) on the backend.
//
//	go run ./cmd/xpu-arena conformance --backend arena
//	go run ./cmd/xpu-arena conformance --backend arena -o capacity=1MiB   # the suites scale to the space
package main

import (
	_ "github.com/xpu-go/xpu/examples/arena" // registers "arena"
	"github.com/xpu-go/xpu/xpucmd"
)

func main() { xpucmd.Main() }
