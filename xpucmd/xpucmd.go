// Package xpucmd is the xpu command as a library: `xpu info`, `xpu
// conformance` and `xpu run` over the backends registered in the program
// that calls it. cmd/xpu is a main package over it, with this repository's
// backends; a backend in a module of its own builds the same command with
// its driver linked in, from a main package of five lines:
//
//	package main
//
//	import (
//		_ "example.com/mybackend" // registers "mybackend" (xpu.Register)
//
//		"github.com/xpu-go/xpu/xpucmd"
//	)
//
//	func main() { xpucmd.Main() }
//
// and then `go run ./cmd/xpu-mybackend conformance --backend mybackend`
// runs the conformance suites over it (conformance.RunDriver) and prints
// their pass/fail matrix. The command knows exactly the drivers registered
// in its program: those its imports register, and no others.
// Package xpucmdtest runs such a command from its main package's tests.
//
// Exit status: 0 on success, 1 when a conformance case or a command fails,
// 2 for bad usage.
package xpucmd

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

// ErrUsage marks an error of a command's arguments: Run prints it after
// the command's name and exits with status 2.
var ErrUsage = errors.New("usage")

// Command is a subcommand of the xpu command: Run parses args (the
// arguments after the command's name), writes to stdout and stderr, and
// returns nil on success, an error wrapping ErrUsage (or flag.ErrHelp) for
// bad usage, or another error when it fails.
type Command struct {
	Name    string
	Summary string // one line, for the command's usage
	Run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// builtin are the commands every xpu command has.
func builtin() []Command {
	return []Command{
		{"info", "list backends: availability (and why not), devices, concepts, capabilities", runInfo},
		{"conformance", "run the conformance suites against registered backends; print a pass/fail matrix", runConformance},
		{"run", "launch N ranks of a program locally: xpu run -n N [--] prog args", runRun},
		{"flight", "say why a job hangs from its ranks' flight records: xpu flight DIR", runFlight},
	}
}

// Main runs the xpu command with the program's arguments (os.Args[1:]) and
// exits with its status. SIGINT and SIGTERM cancel the command's context.
// The commands given in extra are offered besides info, conformance and
// run (cmd/xpu adds bench); one of the same name replaces the built-in one.
func Main(extra ...Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr, extra...)
	stop()
	os.Exit(code)
}

// Run runs the xpu command with args (without the program's name), with
// the commands of extra besides the built-in ones, and returns its exit
// status. The conformance command runs the suites as `go test` would,
// through package testing's global state: it may run once per process.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, extra ...Command) int {
	cmds := commands(extra)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range cmds {
		if c.Name != args[0] {
			continue
		}
		err := c.Run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, ErrUsage):
			fmt.Fprintln(stderr, "xpu "+c.Name+":", err)
			return 2
		default:
			fmt.Fprintln(stderr, "xpu "+c.Name+":", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "xpu: unknown command %q\n\n", args[0])
	usage(stderr, cmds)
	return 2
}

// commands returns the built-in commands, replaced or followed by extra.
func commands(extra []Command) []Command {
	cmds := builtin()
	for _, e := range extra {
		replaced := false
		for i := range cmds {
			if cmds[i].Name == e.Name {
				cmds[i], replaced = e, true
			}
		}
		if !replaced {
			cmds = append(cmds, e)
		}
	}
	return cmds
}

func usage(w io.Writer, cmds []Command) {
	fmt.Fprintln(w, "usage: xpu <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-12s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'xpu <command> -h' for a command's flags.")
}

// NewFlagSet returns the flag set of command name, which reports its errors
// to stderr and does not exit: ParseFlags turns them into ErrUsage.
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("xpu "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// ParseFlags parses args with fs and refuses arguments after the flags: a
// bad flag or an argument is an error wrapping ErrUsage; -h is
// flag.ErrHelp.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	}
	return nil
}

// parseFlags parses args with fs, leaving the arguments after the flags in
// fs.Args(): a bad flag is an error wrapping ErrUsage; -h is flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}
