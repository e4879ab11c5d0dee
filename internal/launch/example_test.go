//go:build unix

package launch_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/xpu-go/xpu/internal/launch"
)

// Two ranks of a shell command, each told its place in the job.
func ExampleRun() {
	res, err := launch.Run(context.Background(), launch.Spec{
		N:      2,
		Prog:   "sh",
		Args:   []string{"-c", `echo "rank $XPU_RANK of $XPU_WORLD_SIZE"`},
		Stdout: os.Stdout,
	})
	fmt.Println("error:", err)
	fmt.Println("rank 1:", res.Ranks[1])
	// Unordered output:
	// [0] rank 0 of 2
	// [1] rank 1 of 2
	// error: <nil>
	// rank 1: exit status 0
}

// A rank that fails fails the job.
func ExampleRun_failure() {
	_, err := launch.Run(context.Background(), launch.Spec{
		N:    1,
		Prog: "sh",
		Args: []string{"-c", "exit 3"},
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, launch.ErrRankFailed))
	// Output:
	// rank 0 failed: exit status 3
	// true
}
