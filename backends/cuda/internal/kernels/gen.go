//go:build ignore

// Gen regenerates kernels.ptx and testkernels.ptx from kernels.cu and
// testkernels.cu with clang 14 (see package ptxgen for the flags). Run it
// in this directory, through go generate:
//
//	go generate ./backends/cuda/internal/kernels
//
// Flags: -clang names the compiler (default clang-14 on PATH), -o the
// output directory (default the current one).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/xpu-go/xpu/backends/cuda/internal/kernels/internal/ptxgen"
)

func main() {
	clang := flag.String("clang", ptxgen.Clang, "the clang 14 compiler to run")
	out := flag.String("o", ".", "the directory to write the PTX files to")
	flag.Parse()
	log.SetFlags(0)
	if err := ptxgen.Generate(context.Background(), *clang, ".", *out); err != nil {
		log.Fatal(err)
	}
}
