package procs

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/comm"
	"github.com/xpu-go/xpu/internal/jobenv"
)

// jobPort returns the port derived from the job identity of the process's
// environment, checking that it was derived from want.
func jobPort(t *testing.T, want string) string {
	t.Helper()
	port, from := jobenv.JobPort(jobenv.OS)
	require.Equal(t, want, from)
	require.GreaterOrEqual(t, port, jobenv.MinJobPort)
	require.LessOrEqual(t, port, jobenv.MaxJobPort)
	return strconv.Itoa(port)
}

// TestConfigFromEnvPort checks where the master's port comes from: the
// variables first, then the launcher's job identity, then 29500.
func TestConfigFromEnvPort(t *testing.T) {
	clearEnv(t)
	setenv(t, "SLURM_PROCID", "1", "SLURM_NTASKS", "4", "SLURM_NNODES", "1", "SLURM_JOB_ID", "515", "SLURM_STEP_ID", "2")
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:"+jobPort(t, "SLURM_JOB_ID=515 SLURM_STEP_ID=2"), cfg.MasterAddr)
	require.Equal(t, "derived from SLURM_JOB_ID=515 SLURM_STEP_ID=2", cfg.portFrom)
	require.Zero(t, cfg.JoinTimeout)

	t.Setenv("MASTER_PORT", "2222")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:2222", cfg.MasterAddr)
	require.Equal(t, "set by MASTER_PORT", cfg.portFrom)
	t.Setenv(EnvMasterPort, "3333")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:3333", cfg.MasterAddr, "XPU_MASTER_PORT first")
	require.Equal(t, "set by "+EnvMasterPort, cfg.portFrom)
	t.Setenv(EnvMasterPort, "")
	t.Setenv("MASTER_PORT", "http")
	_, err = ConfigFromEnv()
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	require.ErrorContains(t, err, `MASTER_PORT="http"`)

	// No job identity at all: 29500.
	clearEnv(t)
	setenv(t, EnvRank, "0", EnvWorldSize, "2", EnvMasterAddr, "10.0.0.1", EnvJobSecret, "s")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "10.0.0.1:29500", cfg.MasterAddr)
	require.Equal(t, 29500, DefaultMasterPort)

	t.Setenv(EnvJoinTimeout, "90s")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.JoinTimeout)
	for _, bad := range []string{"0", "-1s", "soon"} {
		t.Setenv(EnvJoinTimeout, bad)
		_, err = ConfigFromEnv()
		require.ErrorIs(t, err, comm.ErrInvalidArgument, bad)
		require.ErrorContains(t, err, EnvJoinTimeout)
	}
}

// TestOptionsJoinTimeout checks the option join_timeout.
func TestOptionsJoinTimeout(t *testing.T) {
	cfg, err := optionsConfig(xpu.Options{OptJoinTimeout: " 1500ms "})
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, cfg.JoinTimeout)
	cfg, err = optionsConfig(xpu.Options{"tcp." + OptJoinTimeout: "2m", OptJoinTimeout: "1s"})
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, cfg.JoinTimeout, "the scoped key wins")
	for _, bad := range []string{"0s", "-1s", "soon", "3", ""} {
		_, err := optionsConfig(xpu.Options{OptJoinTimeout: bad})
		var oe *xpu.OptionError
		require.ErrorAs(t, err, &oe, bad)
		require.Equal(t, OptJoinTimeout, oe.Key, bad)
	}
	require.Equal(t, "join_timeout", OptJoinTimeout)
	require.Equal(t, "XPU_JOIN_TIMEOUT", EnvJoinTimeout)
}
