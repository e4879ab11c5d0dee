// Command xpu reports the backends this build knows, runs the conformance
// suites against them, and benchmarks them against their baselines.
//
//	xpu info [--json]
//	xpu conformance [--backend NAME] [--run REGEXP] [-v]
//	xpu bench [--json] [--filter REGEXP] [--count N] [--ref DIR]
//
// Exit status: 0 on success, 1 when a conformance case fails or a command
// fails, 2 for bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

var errUsage = errors.New("usage")

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands []command

func init() {
	commands = []command{
		{"info", "list backends: availability (and why not), devices, concepts, capabilities", runInfo},
		{"conformance", "run the conformance suites against registered backends; print a pass/fail matrix", runConformance},
		{"bench", "benchmark hot paths against their baselines (memmove, errgroup, OpenMP)", runBench},
		{"run", "launch N ranks of a program locally: xpu run -n N [--] prog args", runRun},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: xpu <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'xpu <command> -h' for a command's flags.")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				fmt.Fprintln(stderr, "xpu "+c.name+":", err)
				return 2
			default:
				fmt.Fprintln(stderr, "xpu "+c.name+":", err)
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "xpu: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("xpu "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}
