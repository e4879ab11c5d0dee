package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xpu-go/xpu/xerr"
)

// ErrNoMPI reports that no mpirun was found on PATH. It matches
// xerr.ErrUnavailable.
var ErrNoMPI = xerr.NewKind("mpirun not found on PATH (install Open MPI or MPICH, or launch without MPI)", xerr.ErrUnavailable)

// MPIBackend is the EnvBackend RunMPI sets when the environment has none.
const MPIBackend = "mpi"

// The flavours of mpirun that MPIFlavor tells apart.
const (
	OpenMPI    = "open-mpi"
	MPICH      = "mpich"
	UnknownMPI = "unknown"
)

// MPIFlavor tells which MPI an mpirun belongs to from the output of
// `mpirun --version`.
func MPIFlavor(versionOutput string) string {
	switch {
	case strings.Contains(versionOutput, "Open MPI"), strings.Contains(versionOutput, "OpenRTE"):
		return OpenMPI
	case strings.Contains(versionOutput, "HYDRA"), strings.Contains(versionOutput, "MPICH"),
		strings.Contains(versionOutput, "Intel(R) MPI"):
		return MPICH
	}
	return UnknownMPI
}

// MPICommand returns the command line that runs n ranks of prog under the
// mpirun at path. Open MPI's gets --oversubscribe (more ranks than cores is
// what a local test wants) and, when root is true, --allow-run-as-root;
// other flavours run more ranks than cores and as root without being asked.
func MPICommand(path, flavour string, root bool, n int, prog string, args []string) []string {
	argv := []string{path}
	if flavour == OpenMPI {
		if root {
			argv = append(argv, "--allow-run-as-root")
		}
		argv = append(argv, "--oversubscribe")
	}
	argv = append(argv, "-np", strconv.Itoa(n), prog)
	return append(argv, args...)
}

// FindMPI finds mpirun on PATH and its flavour. It returns an error matching
// ErrNoMPI when there is none.
func FindMPI(ctx context.Context) (path, flavour string, err error) {
	path, err = exec.LookPath("mpirun")
	if err != nil {
		return "", "", xerr.Errorf(place, "", ErrNoMPI, "%w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil && len(out) == 0 {
		if ctx.Err() != nil {
			return "", "", xerr.Op(place, "", fmt.Errorf("%s --version: %w", path, ctx.Err()))
		}
		return path, UnknownMPI, nil
	}
	return path, MPIFlavor(string(out)), nil
}

// RunMPI runs the job under mpirun instead of starting the ranks itself:
// mpirun gives each rank its place in the job (the MPI backend reads it from
// MPI), and EnvBackend=MPIBackend is set when the environment has no
// EnvBackend. Spec.MasterAddr, MasterPort and Secret are not used, Bind is
// refused (mpirun binds: --bind-to), and the
// output is mpirun's, unprefixed. A `go run` program is built once, as by
// Run. Cancelling ctx, or Spec.Timeout, forwards the signal to mpirun
// (which passes it to its ranks), then SIGKILL after Spec.Grace to mpirun's
// process group. Should the process running RunMPI die, its watchdog (see
// Run) does the same, on Linux: mpirun stops its ranks, which are its to
// stop. RunMPI returns nil when mpirun exits with status 0, an
// error matching ErrRankFailed when it fails, and one matching ctx.Err() or
// ErrJobTimeout when the job is interrupted.
func RunMPI(ctx context.Context, spec Spec) error {
	if err := spec.normalize(); err != nil {
		return err
	}
	if spec.Bind {
		return xerr.Errorf(place, "", ErrInvalidArgument, "Bind does not apply to RunMPI: mpirun binds the ranks (--bind-to)")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	path, flavour, err := FindMPI(ctx)
	if err != nil {
		return err
	}
	out := newOutput(spec.Stdout, spec.Stderr)
	if !spec.NoBuild {
		prog, args, cleanup, err := buildGoRun(ctx, &spec, out)
		if err != nil {
			return err
		}
		defer cleanup()
		spec.Prog, spec.Args = prog, args
	}
	cmd := mpiCmd(&spec, path, flavour)

	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, spec.Timeout, ErrJobTimeout)
		defer cancel()
	}
	// Should this process die, the watchdog sends mpirun SIGTERM, once, and
	// mpirun stops its ranks as it does when interrupted; SIGKILL follows
	// after the grace period. (Not the parent-death signal, which the kernel
	// may send more than once: mpirun takes a second SIGTERM for "exit now"
	// and leaves its ranks.) The gate has mpirun wait until the watchdog
	// knows its group.
	wd, err := startWatchdog(spec.Grace, func(format string, args ...any) {
		if spec.LogPrefix != "" {
			out.line(out.stderr, spec.LogPrefix+fmt.Sprintf(format, args...))
		}
	})
	if err != nil && spec.LogPrefix != "" {
		out.line(out.stderr, spec.LogPrefix+fmt.Sprintf("no watchdog (%v): should this launcher die, mpirun would outlive it", err))
	}
	defer wd.stop()
	var g *gate
	if wd != nil {
		g = gateRank(cmd)
	}
	waited := make(chan error, 1)
	release := func() error { return g.open(cmd.Process.Pid, wd) }
	if _, err := startTied(cmd, nil, release, func(err error, _ time.Time) { waited <- err }); err != nil {
		g.abort()
		return xerr.Op(place, "", fmt.Errorf("start %s: %w", path, err))
	}
	werr, interrupted := waitMPI(ctx, cmd, &spec, waited)
	if interrupted != nil {
		return interrupted
	}
	return mpiExit(cmd, path, werr)
}

// mpiCmd returns the command that runs spec's ranks under the mpirun at
// path, with EnvBackend=MPIBackend unless the environment sets EnvBackend.
func mpiCmd(spec *Spec, path, flavour string) *exec.Cmd {
	argv := MPICommand(path, flavour, os.Geteuid() == 0, spec.N, spec.Prog, spec.Args)
	env := spec.Env
	if v, ok := lookupEnv(env, EnvBackend); !ok || strings.TrimSpace(v) == "" {
		env = withEnv(env, EnvBackend+"="+MPIBackend)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	cmd.WaitDelay = spec.Grace
	// In a group of its own, mpirun gets a terminal's Ctrl-C once, from
	// us, rather than twice (Open MPI reads a second one as "kill now").
	setGroup(cmd)
	return cmd
}

// waitMPI waits until the started mpirun is reaped, which reports on
// waited. Should ctx end first, it forwards the signal to mpirun, SIGKILL
// to its group after the grace period, and returns why the job was
// interrupted besides how the wait ended.
func waitMPI(ctx context.Context, cmd *exec.Cmd, spec *Spec, waited <-chan error) (werr, interrupted error) {
	var grace <-chan time.Time
	for {
		select {
		case werr = <-waited:
			return werr, interrupted
		case <-ctx.Done():
			cause := context.Cause(ctx)
			if errors.Is(cause, ErrJobTimeout) {
				interrupted = fmt.Errorf("%w after %v", ErrJobTimeout, spec.Timeout)
			} else {
				interrupted = fmt.Errorf("job interrupted: %w", ctx.Err())
			}
			_ = cmd.Process.Signal(signalOf(cause))
			t := time.NewTimer(spec.Grace)
			defer t.Stop()
			grace = t.C
			ctx = context.WithoutCancel(ctx) // Done is nil from now on
		case <-grace:
			grace = nil
			signalGroup(cmd.Process, syscall.SIGKILL)
		}
	}
}

// mpiExit returns what RunMPI returns for how mpirun, reaped with werr,
// ended.
func mpiExit(cmd *exec.Cmd, path string, werr error) error {
	if cmd.ProcessState == nil {
		return xerr.Op(place, "", fmt.Errorf("wait for %s: %w", path, werr))
	}
	code, sig := exitInfo(cmd.ProcessState)
	switch {
	case sig != nil:
		return fmt.Errorf("mpirun killed by signal %s: %w", SignalName(sig), ErrRankFailed)
	case code != 0:
		return fmt.Errorf("mpirun exited with status %d: %w", code, ErrRankFailed)
	}
	return nil
}
