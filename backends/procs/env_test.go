package procs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/comm"
)

func clearEnv(t *testing.T) {
	for _, v := range []string{EnvRank, EnvWorldSize, EnvMasterAddr, EnvMasterPort, EnvJobSecret, EnvTimeout, EnvSpin, EnvJoinTimeout,
		EnvLinks, EnvNode, EnvShmRing, EnvShmSpin,
		"MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
		"PMIX_RANK", "PMIX_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODELIST", "SLURM_LAUNCH_NODE_IPADDR",
		"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NNODES", "SLURM_NTASKS_PER_NODE", "PMIX_NAMESPACE",
		"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_KVSNAME", "MPI_LOCALNRANKS"} {
		t.Setenv(v, "")
	}
}

// setenv sets each pair of kv (name, value) for the test's span.
func setenv(t *testing.T, kv ...string) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func TestConfigFromEnv(t *testing.T) {
	clearEnv(t)
	_, err := ConfigFromEnv()
	require.ErrorIs(t, err, comm.ErrInvalidArgument, "no launcher")
	require.False(t, InJob())

	setenv(t, EnvRank, "2", EnvWorldSize, "4", EnvMasterAddr, "10.0.0.1", EnvMasterPort, "1234", EnvJobSecret, "xyz", EnvTimeout, "3s")
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	require.True(t, InJob())
	require.Equal(t, 2, cfg.Rank)
	require.Equal(t, 4, cfg.Size)
	require.Equal(t, "10.0.0.1:1234", cfg.MasterAddr)
	require.Equal(t, []byte("xyz"), cfg.Secret)
	require.Equal(t, "3s", cfg.Timeout.String())

	t.Setenv(EnvMasterPort, "http")
	_, err = ConfigFromEnv()
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	t.Setenv(EnvMasterPort, "")
	t.Setenv(EnvTimeout, "-1s")
	_, err = ConfigFromEnv()
	require.ErrorIs(t, err, comm.ErrInvalidArgument)
	t.Setenv(EnvTimeout, "")
	t.Setenv(EnvSpin, "50us")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 50*time.Microsecond, cfg.Spin)
	// Zero and negative never spin, as in every spin variable.
	for _, never := range []string{"0", "-1us"} {
		t.Setenv(EnvSpin, never)
		cfg, err = ConfigFromEnv()
		require.NoError(t, err, never)
		require.Negative(t, cfg.Spin, never)
	}
	for _, bad := range []string{"1s", "fast"} {
		t.Setenv(EnvSpin, bad)
		_, err = ConfigFromEnv()
		require.ErrorIs(t, err, comm.ErrInvalidArgument, bad)
	}
}

func TestConfigFromMPIEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
	_, err := ConfigFromEnv()
	require.ErrorIs(t, err, comm.ErrInvalidArgument, "no secret and no job id")
	t.Setenv("PMIX_NAMESPACE", "prterun-host-123@1")
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 1, cfg.Rank)
	require.Equal(t, "127.0.0.1:"+jobPort(t, "PMIX_NAMESPACE=prterun-host-123@1"), cfg.MasterAddr, "all ranks local")
	require.NotEmpty(t, cfg.Secret)
	t.Setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1")
	_, err = ConfigFromEnv()
	require.ErrorIs(t, err, comm.ErrInvalidArgument, "ranks on several hosts and no master")
}

// TestConfigFromPMIxEnv checks a job that a PMIx launcher (prterun)
// describes: rank and size from PMIX_RANK and PMIX_SIZE, the secret from
// its namespace.
func TestConfigFromPMIxEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("PMIX_RANK", "2")
	t.Setenv("PMIX_SIZE", "3")
	t.Setenv(EnvMasterAddr, "10.0.0.7")
	require.True(t, InJob())
	_, err := ConfigFromEnv()
	require.ErrorIs(t, err, comm.ErrInvalidArgument, "no secret and no job id")
	t.Setenv("PMIX_NAMESPACE", "prterun-host-9@1")
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 2, cfg.Rank)
	require.Equal(t, 3, cfg.Size)
	require.Equal(t, "10.0.0.7:"+jobPort(t, "PMIX_NAMESPACE=prterun-host-9@1"), cfg.MasterAddr)
	require.NotEmpty(t, cfg.Secret)
}

// TestConfigFromBadEnv checks that rank variables that do not describe a
// rank of a job are an error, never taken for no job or for another
// launcher's.
func TestConfigFromBadEnv(t *testing.T) {
	for _, tc := range []struct{ rank, size string }{
		{"x", "4"}, {"1", "four"}, {"4", "4"}, {"-1", "4"}, {"0", "0"},
	} {
		clearEnv(t)
		setenv(t, EnvJobSecret, "xyz", "SLURM_PROCID", "0", "SLURM_NTASKS", "1", "PMIX_RANK", tc.rank, "PMIX_SIZE", tc.size)
		_, err := ConfigFromEnv()
		require.ErrorIs(t, err, comm.ErrInvalidArgument, "%+v", tc)
		require.ErrorContains(t, err, "PMIX_RANK", "%+v", tc)
		require.NotContains(t, err.Error(), "\n", "%+v", tc)
	}
}

func TestConfigFromSlurmEnv(t *testing.T) {
	clearEnv(t)
	setenv(t, "SLURM_PROCID", "3", "SLURM_NTASKS", "8", "SLURM_JOB_ID", "77", "SLURM_NODELIST", "gpu[07-10,12],cpu1")
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 3, cfg.Rank)
	require.Equal(t, 8, cfg.Size)
	require.Equal(t, "gpu07:"+jobPort(t, "SLURM_JOB_ID=77"), cfg.MasterAddr)
	t.Setenv("SLURM_NODELIST", "weird[a-b]")
	t.Setenv("SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "10.1.2.3:"+jobPort(t, "SLURM_JOB_ID=77"), cfg.MasterAddr)
}

// TestConfigFromEnvLinks reads the variables of the links: their kind, the
// node, the rings' size and the spin budget, and refuses bad values.
func TestConfigFromEnvLinks(t *testing.T) {
	clearEnv(t)
	setenv(t, EnvRank, "0", EnvWorldSize, "2", EnvMasterAddr, "127.0.0.1", EnvJobSecret, "s")
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, LinkAuto, cfg.Links)
	setenv(t, EnvLinks, " SHM ", EnvNode, "rack1", EnvShmRing, "256K", EnvShmSpin, "0")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, LinkShm, cfg.Links)
	require.Equal(t, "rack1", cfg.Node)
	require.Equal(t, 256<<10, cfg.ShmRing)
	require.Negative(t, cfg.ShmSpin, "0 sleeps at once")
	for v, bad := range map[string]string{EnvLinks: "rdma", EnvShmRing: "3000", EnvShmSpin: "1s"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, bad)
			_, err := ConfigFromEnv()
			require.ErrorIs(t, err, comm.ErrInvalidArgument)
			require.ErrorContains(t, err, v)
		})
	}
	for m, want := range map[LinkMode]string{LinkAuto: "auto", LinkTCP: "tcp", LinkShm: "shm", 7: "LinkMode(7)"} {
		require.Equal(t, want, m.String())
	}
}
