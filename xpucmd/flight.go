package xpucmd

import (
	"context"
	"fmt"
	"io"

	"github.com/xpu-go/xpu/flight"
)

// runFlight is `xpu flight DIR`: it reads the flight records the ranks of
// a job wrote into DIR (flight.EnvDir; under mpirun or srun, set it for
// the job and send the ranks SIGQUIT or flight.DumpSignal) and prints
// what they say. It fails when DIR holds no record it can read.
func runFlight(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := NewFlagSet("flight", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: xpu flight DIR")
		fmt.Fprintln(stderr, "Reads the flight records (flight.rank*.json) the ranks of a job wrote into DIR — the directory")
		fmt.Fprintln(stderr, "XPU_FLIGHT_DIR named for them; a rank writes its own on SIGQUIT, on SIGUSR2 and when a collective is")
		fmt.Fprintln(stderr, "revoked — and says which ranks wait where, mismatched collectives, ranks that never entered one,")
		fmt.Fprintln(stderr, "and messages no receive matched.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: xpu flight takes one directory, got %d arguments", ErrUsage, fs.NArg())
	}
	dir := fs.Arg(0)
	dumps, err := flight.ReadDir(dir)
	if len(dumps) == 0 {
		return err
	}
	if err != nil {
		fmt.Fprintf(stderr, "xpu flight: some records were not read: %v\n", err)
	}
	ranks := "ranks"
	if len(dumps) == 1 {
		ranks = "rank"
	}
	fmt.Fprintf(stdout, "flight records of %d %s in %s:\n", len(dumps), ranks, dir)
	lines := flight.Analyze(dumps)
	if len(lines) == 0 {
		fmt.Fprintln(stdout, "  nothing pending, nothing mismatched")
	}
	for _, l := range lines {
		fmt.Fprintf(stdout, "  %s\n", l)
	}
	return nil
}
