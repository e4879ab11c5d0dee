package jobenv_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/xerr"
)

func TestFindEveryLauncher(t *testing.T) {
	require.Len(t, jobenv.Launchers, 5)
	names := map[string]bool{}
	for _, l := range jobenv.Launchers {
		names[l.Name] = true
		t.Run(l.Name, func(t *testing.T) {
			p, ok, err := jobenv.Find(jobenv.Map(map[string]string{l.Rank: "2", l.Size: " 4 "}))
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, jobenv.Place{Launcher: l.Name, Rank: 2, Size: 4}, p)
			assert.Equal(t, "rank 2 of 4 ("+l.Name+")", p.String())
			assert.True(t, jobenv.InJob(jobenv.Map(map[string]string{l.Rank: "2", l.Size: "4"})))

			// One variable of the pair is not a job.
			for _, only := range []string{l.Rank, l.Size} {
				env := jobenv.Map(map[string]string{only: "1"})
				_, ok, err := jobenv.Find(env)
				require.NoError(t, err)
				assert.False(t, ok, "%s alone", only)
				assert.False(t, jobenv.InJob(env), "%s alone", only)
			}
		})
	}
	assert.Equal(t, map[string]bool{"xpu": true, "open-mpi": true, "pmix": true, "pmi": true, "slurm": true}, names)
	assert.Equal(t, jobenv.Rank, jobenv.Launchers[0].Rank, "xpu's own variables come first")
	assert.Equal(t, jobenv.WorldSize, jobenv.Launchers[0].Size)
	assert.Equal(t, jobenv.LocalSize, jobenv.Launchers[0].LocalSize)
}

// An earlier launcher of the table wins over every later one, so that
// `xpu run` under an outer launcher is the one obeyed.
func TestFindOrderOfPreference(t *testing.T) {
	env := map[string]string{
		jobenv.Rank: "1", jobenv.WorldSize: "2",
		"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
	}
	p, ok, err := jobenv.Find(jobenv.Map(env))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, jobenv.Place{Launcher: "xpu", Rank: 1, Size: 2}, p, "XPU wins over Open MPI")

	ls := jobenv.Launchers
	for i := range ls {
		for j := i + 1; j < len(ls); j++ {
			env := map[string]string{ls[i].Rank: "0", ls[i].Size: "3", ls[j].Rank: "1", ls[j].Size: "2"}
			p, ok, err := jobenv.Find(jobenv.Map(env))
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, jobenv.Place{Launcher: ls[i].Name, Rank: 0, Size: 3}, p, "%s over %s", ls[i].Name, ls[j].Name)
		}
	}
}

func TestFindMalformed(t *testing.T) {
	for _, l := range jobenv.Launchers {
		for _, v := range [][2]string{{"x", "4"}, {"1", "four"}, {"4", "4"}, {"-1", "4"}, {"0", "0"}, {"0", "-2"}, {"1.0", "2"}} {
			env := map[string]string{l.Rank: v[0], l.Size: v[1]}
			_, ok, err := jobenv.Find(jobenv.Map(env))
			require.Error(t, err, "%s=%q %s=%q", l.Rank, v[0], l.Size, v[1])
			assert.False(t, ok)
			assert.ErrorIs(t, err, xerr.ErrInvalidArgument)
			msg := err.Error()
			assert.Contains(t, msg, l.Rank+`="`+v[0]+`"`)
			assert.Contains(t, msg, l.Size+`="`+v[1]+`"`)
			assert.NotContains(t, msg, "\n")
		}
	}
	// A job described wrongly is never taken for another launcher's job.
	env := map[string]string{jobenv.Rank: "9", jobenv.WorldSize: "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
	_, ok, err := jobenv.Find(jobenv.Map(env))
	assert.False(t, ok)
	require.ErrorIs(t, err, xerr.ErrInvalidArgument)
	assert.Equal(t, `env xpu: XPU_RANK="9" and XPU_WORLD_SIZE="2" are not a rank of a job of at least one rank: invalid argument`,
		err.Error())
}

func TestFindNoJob(t *testing.T) {
	for _, env := range []map[string]string{nil, {}, {"PATH": "/bin", jobenv.Backend: "cpu"}, {jobenv.Rank: " ", jobenv.WorldSize: "2"}} {
		p, ok, err := jobenv.Find(jobenv.Map(env))
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Zero(t, p)
	}
	assert.False(t, jobenv.InJob(jobenv.Map(nil)))
}

func TestAllLocal(t *testing.T) {
	none := jobenv.Map(nil)
	assert.True(t, jobenv.AllLocal(none, 1), "a job of one rank")
	assert.False(t, jobenv.AllLocal(none, 2), "nothing says so")
	for _, l := range jobenv.Launchers {
		if l.LocalSize == "" {
			continue
		}
		assert.True(t, jobenv.AllLocal(jobenv.Map(map[string]string{l.LocalSize: "4"}), 4), l.LocalSize)
		assert.True(t, jobenv.AllLocal(jobenv.Map(map[string]string{l.LocalSize: " 4 "}), 4), l.LocalSize)
		assert.False(t, jobenv.AllLocal(jobenv.Map(map[string]string{l.LocalSize: "2"}), 4), l.LocalSize)
		assert.False(t, jobenv.AllLocal(jobenv.Map(map[string]string{l.LocalSize: "four"}), 4), l.LocalSize)
	}
	assert.True(t, jobenv.AllLocal(jobenv.Map(map[string]string{"SLURM_NNODES": "1"}), 8), "one Slurm node")
	assert.False(t, jobenv.AllLocal(jobenv.Map(map[string]string{"SLURM_NNODES": "2"}), 8))
	assert.True(t, jobenv.AllLocal(jobenv.Map(map[string]string{jobenv.LocalSize: "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "3"}), 3),
		"any launcher that says so")
}

func TestJobID(t *testing.T) {
	assert.Equal(t, "", jobenv.JobID(jobenv.Map(nil)))
	assert.Equal(t, "slurm 12.3", jobenv.JobID(jobenv.Map(map[string]string{"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "3"})))
	for _, v := range []string{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_KVSNAME"} {
		assert.Equal(t, v+" j1", jobenv.JobID(jobenv.Map(map[string]string{v: "j1"})))
	}
	// Slurm first, then in the order above.
	all := map[string]string{"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "PMIX_NAMESPACE": "ns", "PMI_KVSNAME": "kvs"}
	assert.Equal(t, "slurm 7.0", jobenv.JobID(jobenv.Map(all)))
	delete(all, "SLURM_JOB_ID")
	assert.Equal(t, "PMIX_NAMESPACE ns", jobenv.JobID(jobenv.Map(all)))
}

func TestNames(t *testing.T) {
	for _, v := range []string{jobenv.Rank, jobenv.WorldSize, jobenv.LocalRank, jobenv.LocalSize, jobenv.MasterAddr,
		jobenv.MasterPort, jobenv.JobSecret, jobenv.Backend} {
		assert.True(t, strings.HasPrefix(v, "XPU_"), v)
	}
	assert.Equal(t, "XPU_BACKEND", jobenv.Backend)
}

// MultiRank answers only for a rank of a job of several ranks, and takes
// Slurm's variables for one only inside a job step: a batch script has
// SLURM_PROCID and SLURM_NTASKS too.
func TestMultiRank(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string // the place, "" for none
	}{
		{map[string]string{jobenv.Rank: "1", jobenv.WorldSize: "4"}, "rank 1 of 4 (xpu)"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, "rank 3 of 4 (open-mpi)"},
		{map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2"}, "rank 0 of 2 (pmi)"},
		{map[string]string{"SLURM_PROCID": "2", "SLURM_NTASKS": "8", "SLURM_STEP_ID": "0"}, "rank 2 of 8 (slurm)"},
		{map[string]string{"SLURM_PROCID": "2", "SLURM_NTASKS": "8", "SLURM_STEPID": "0"}, "rank 2 of 8 (slurm)"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "77"}, ""}, // a batch script
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}, ""},       // a job of one rank
		{nil, ""},
	} {
		p, ok, err := jobenv.MultiRank(jobenv.Map(c.env))
		require.NoError(t, err, "%v", c.env)
		if c.want == "" {
			assert.False(t, ok, "%v", c.env)
			assert.Zero(t, p)
			continue
		}
		assert.True(t, ok, "%v", c.env)
		assert.Equal(t, c.want, p.String())
	}
	_, ok, err := jobenv.MultiRank(jobenv.Map(map[string]string{"PMI_RANK": "4", "PMI_SIZE": "4"}))
	assert.False(t, ok)
	assert.ErrorIs(t, err, xerr.ErrInvalidArgument, "variables that describe no rank are an error, as Find's")
}
