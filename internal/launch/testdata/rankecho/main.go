// Command rankecho prints its rank, the size of its job, its arguments and
// the path of its executable: the program of launch's `go run` test.
package main

import (
	"fmt"
	"os"
)

func main() {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("rank %s of %s args %q exe %s\n", os.Getenv("XPU_RANK"), os.Getenv("XPU_WORLD_SIZE"), os.Args[1:], exe)
}
