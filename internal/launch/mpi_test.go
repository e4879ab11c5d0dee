//go:build unix

package launch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/xerr"
)

func TestMPIFlavor(t *testing.T) {
	assert.Equal(t, OpenMPI, MPIFlavor("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/"))
	assert.Equal(t, OpenMPI, MPIFlavor("mpirun (Open MPI) 5.0.3"))
	assert.Equal(t, MPICH, MPIFlavor("HYDRA build details:\n    Version:                                 4.0"))
	assert.Equal(t, UnknownMPI, MPIFlavor("something else"))
}

func TestMPICommand(t *testing.T) {
	assert.Equal(t, []string{"/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4", "prog", "-x", "y"},
		MPICommand("/bin/mpirun", OpenMPI, true, 4, "prog", []string{"-x", "y"}))
	assert.Equal(t, []string{"mpirun", "--oversubscribe", "-np", "2", "prog"},
		MPICommand("mpirun", OpenMPI, false, 2, "prog", nil))
	assert.Equal(t, []string{"mpirun", "-np", "3", "prog", "a"},
		MPICommand("mpirun", MPICH, true, 3, "prog", []string{"a"}))
}

// fakeMPI puts on PATH an mpirun that reports itself as Open MPI, prints
// its arguments and XPU_BACKEND, and exits with FAKE_MPIRUN_EXIT; with
// FAKE_MPIRUN_SLEEP set it sleeps instead.
func fakeMPI(t *testing.T) {
	dir := t.TempDir()
	script := `#!/bin/sh
if [ "$1" = "--version" ]; then echo "mpirun (Open MPI) 4.1.4"; exit 0; fi
echo "args: $*"
echo "backend: $XPU_BACKEND"
if [ -n "$FAKE_MPIRUN_SLEEP" ]; then exec sleep 600; fi
exit ${FAKE_MPIRUN_EXIT:-0}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mpirun"), []byte(script), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(EnvBackend, "")
}

func TestRunMPIFake(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	fakeMPI(t)
	var stdout syncBuffer
	err := RunMPI(guard(t), Spec{N: 3, Prog: "prog", Args: []string{"a", "b"}, Stdout: &stdout})
	require.NoError(t, err)
	root := ""
	if os.Geteuid() == 0 {
		root = "--allow-run-as-root "
	}
	assert.Equal(t, []string{"args: " + root + "--oversubscribe -np 3 prog a b", "backend: mpi"}, stdout.Lines())

	t.Run("backend kept", func(t *testing.T) {
		var stdout syncBuffer
		env := withEnv(os.Environ(), EnvBackend+"=cuda,mpi")
		require.NoError(t, RunMPI(guard(t), Spec{N: 1, Prog: "p", Env: env, Stdout: &stdout}))
		assert.Contains(t, stdout.Lines(), "backend: cuda,mpi")
	})
	t.Run("failure", func(t *testing.T) {
		env := withEnv(os.Environ(), "FAKE_MPIRUN_EXIT=5")
		err := RunMPI(guard(t), Spec{N: 2, Prog: "p", Env: env})
		require.ErrorIs(t, err, ErrRankFailed)
		assert.Contains(t, err.Error(), "mpirun exited with status 5")
	})
	t.Run("timeout", func(t *testing.T) {
		env := withEnv(os.Environ(), "FAKE_MPIRUN_SLEEP=1")
		err := RunMPI(guard(t), Spec{N: 2, Prog: "p", Env: env, Timeout: 200 * time.Millisecond})
		require.ErrorIs(t, err, ErrJobTimeout)
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(guard(t))
		defer cancel()
		env := withEnv(os.Environ(), "FAKE_MPIRUN_SLEEP=1")
		stdout := &syncBuffer{onLine: func(l string) {
			if strings.HasPrefix(l, "backend:") {
				cancel()
			}
		}}
		err := RunMPI(ctx, Spec{N: 2, Prog: "p", Env: env, Stdout: stdout})
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("bad spec", func(t *testing.T) {
		require.ErrorIs(t, RunMPI(guard(t), Spec{N: 0, Prog: "p"}), ErrInvalidArgument)
	})
}

func TestRunMPINotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := RunMPI(guard(t), Spec{N: 2, Prog: "p"})
	require.ErrorIs(t, err, ErrNoMPI)
	require.ErrorIs(t, err, xerr.ErrUnavailable)
	assert.Contains(t, err.Error(), "mpirun not found on PATH")
}

// With a real mpirun, the ranks learn their place from MPI.
func TestRunMPIReal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mpirun")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("no mpirun")
	}
	spec, stdout, stderr := capturedRoleSpec(2, "mpienv")
	require.NoError(t, RunMPI(guard(t), spec), "stderr: %s", stderr.String())
	assert.ElementsMatch(t, []string{"rank 0 of 2 backend mpi", "rank 1 of 2 backend mpi"}, stdout.Lines())
}
