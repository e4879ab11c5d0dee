package xpucmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/xpu-go/xpu/internal/launch"
)

// runRun is `xpu run`: it starts N ranks of a program on this machine (or
// hands them to mpirun with --mpi) and waits for them. The work is done by
// package launch; this parses the command line.
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := NewFlagSet("run", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: xpu run -n N [flags] [--] prog [args...]")
		fmt.Fprintln(stderr)
		fmt.Fprintf(stderr, "Starts N ranks of prog on this machine with %s, %s, %s, %s,\n",
			launch.EnvRank, launch.EnvWorldSize, launch.EnvLocalRank, launch.EnvLocalSize)
		fmt.Fprintf(stderr, "%s, %s, %s and %s (%s unless set) in their\n",
			launch.EnvMasterAddr, launch.EnvMasterPort, launch.EnvJobSecret, launch.EnvBackend, launch.DefaultBackend)
		fmt.Fprintln(stderr, "environment, prefixes their output lines with [rank], and stops them all when one fails,")
		fmt.Fprintln(stderr, "naming the rank that failed first and the others' failures as its consequences.")
		fmt.Fprintln(stderr, "`go run pkg` as prog is built once and the binary started N times.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	n := fs.Int("n", 0, "number of ranks (required, at least 1)")
	useMPI := fs.Bool("mpi", false, "run the ranks under mpirun instead (for the mpi backend)")
	addr := fs.String("master-addr", launch.DefaultMasterAddr, "address of rank 0's rendezvous store")
	port := fs.Int("port", 0, "port of rank 0's rendezvous store (default: a free port)")
	timeout := fs.Duration("timeout", 0, "stop the job after this long (default: no limit)")
	grace := fs.Duration("grace", launch.DefaultGrace, "time ranks have to exit after SIGTERM before SIGKILL")
	failGrace := fs.Duration("fail-grace", launch.DefaultFailGrace,
		"after a rank fails, time the others have to end on their own before SIGTERM (0: none)")
	noBuild := fs.Bool("no-build", false, "run `go run` in every rank as given instead of building once")
	bind := fs.Bool("bind", false, "bind each rank to its share of this machine's processors (Linux; "+
		"a run of them each, or one each in turn when there are more ranks than processors)")
	if err := parseFlags(fs, args); err != nil { // prog and its arguments follow the flags
		return err
	}
	rest := fs.Args()
	switch {
	case *n < 1:
		return fmt.Errorf("%w: -n %d: want at least 1 rank (xpu run -n N [--] prog [args...])", ErrUsage, *n)
	case len(rest) == 0:
		return fmt.Errorf("%w: no program to run (xpu run -n N [--] prog [args...])", ErrUsage)
	case *failGrace < 0:
		return fmt.Errorf("%w: --fail-grace %v: want zero or more", ErrUsage, *failGrace)
	}
	if *failGrace == 0 {
		*failGrace = -1 // launch.Spec's "none"
	}
	spec := launch.Spec{
		N:          *n,
		Prog:       rest[0],
		Args:       rest[1:],
		NoBuild:    *noBuild,
		MasterAddr: *addr,
		MasterPort: *port,
		Timeout:    *timeout,
		Grace:      *grace,
		FailGrace:  *failGrace,
		Stdout:     stdout,
		Stderr:     stderr,
		LogPrefix:  "xpu run: ",
		Bind:       *bind,
	}
	var err error
	if *useMPI {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["master-addr"] || set["port"] {
			return fmt.Errorf("%w: --master-addr and --port do not apply to --mpi (mpirun wires the ranks)", ErrUsage)
		}
		if *bind {
			return fmt.Errorf("%w: --bind does not apply to --mpi (mpirun binds the ranks: --bind-to)", ErrUsage)
		}
		err = launch.RunMPI(ctx, spec)
	} else {
		_, err = launch.Run(ctx, spec)
	}
	if errors.Is(err, launch.ErrInvalidArgument) {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return err
}
