//go:build !linux

package launch

import (
	"fmt"
	"os"
)

// commRole needs the procs communicator's shared memory and the Linux
// launcher: elsewhere it says so and fails.
func commRole(mode string, _ int) int {
	fmt.Fprintf(os.Stderr, "comm %s: the communicator roles run on Linux only\n", mode)
	return 2
}
