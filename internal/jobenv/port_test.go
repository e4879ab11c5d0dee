package jobenv_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu/internal/jobenv"
)

// TestJobPort checks the port derived from a job's identity: in the range,
// the same for every rank of a job, different for a job beside it, and the
// default only when no launcher names the job.
func TestJobPort(t *testing.T) {
	port, from := jobenv.JobPort(jobenv.Map(nil))
	assert.Equal(t, jobenv.DefaultMasterPort, port)
	assert.Equal(t, 29500, port)
	assert.Empty(t, from)

	step := func(job, step, rank string) map[string]string {
		return map[string]string{"SLURM_PROCID": rank, "SLURM_NTASKS": "4", "SLURM_JOB_ID": job, "SLURM_STEP_ID": step}
	}
	p0, from := jobenv.JobPort(jobenv.Map(step("4242", "0", "0")))
	assert.Equal(t, "SLURM_JOB_ID=4242 SLURM_STEP_ID=0", from)
	assert.GreaterOrEqual(t, p0, jobenv.MinJobPort)
	assert.LessOrEqual(t, p0, jobenv.MaxJobPort)
	p3, _ := jobenv.JobPort(jobenv.Map(step("4242", "0", "3")))
	assert.Equal(t, p0, p3, "every rank of a step")
	other, _ := jobenv.JobPort(jobenv.Map(step("4242", "1", "0")))
	assert.NotEqual(t, p0, other, "the next step")
	other, _ = jobenv.JobPort(jobenv.Map(step("4243", "0", "0")))
	assert.NotEqual(t, p0, other, "the next job")
	spaced, _ := jobenv.JobPort(jobenv.Map(step(" 4242 ", "0", "0")))
	assert.Equal(t, p0, spaced)

	// Many jobs spread over the range.
	seen := map[int]bool{}
	for i := range 1000 {
		p, _ := jobenv.JobPort(jobenv.Map(map[string]string{"SLURM_JOB_ID": "1000", "SLURM_STEP_ID": string(rune('a'+i%26)) + string(rune('a'+i/26))}))
		assert.GreaterOrEqual(t, p, jobenv.MinJobPort)
		assert.LessOrEqual(t, p, jobenv.MaxJobPort)
		seen[p] = true
	}
	assert.Greater(t, len(seen), 900, "1000 steps over 10000 ports")

	for _, l := range jobenv.Launchers {
		for _, v := range l.JobIDs {
			p, from := jobenv.JobPort(jobenv.Map(map[string]string{l.Rank: "0", l.Size: "2", v: "j1"}))
			assert.Equal(t, v+"=j1", from, "%s: %s", l.Name, v)
			assert.NotEqual(t, jobenv.DefaultMasterPort, p)
		}
	}
}

// TestJobPortPlacingLauncher checks that the identity of the launcher
// that placed the rank is taken first, and that xpu's own variables set by
// hand take the next launcher's.
func TestJobPortPlacingLauncher(t *testing.T) {
	// An mpirun inside a Slurm allocation: Open MPI placed the rank, and
	// its job id names the job, whatever Slurm's step says.
	env := map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "8",
		"OMPI_MCA_ess_base_jobid": "123", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}
	_, from := jobenv.JobPort(jobenv.Map(env))
	assert.Equal(t, "OMPI_MCA_ess_base_jobid=123", from)
	// srun: Slurm placed it, and a PMIx namespace (srun --mpi=pmix) does
	// not enter.
	env = map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "2",
		"PMIX_NAMESPACE": "slurm.pmix.77.2"}
	_, from = jobenv.JobPort(jobenv.Map(env))
	assert.Equal(t, "SLURM_JOB_ID=77 SLURM_STEP_ID=2", from)
	// XPU_RANK set by hand in an srun step: Slurm's identity.
	env = map[string]string{jobenv.Rank: "1", jobenv.WorldSize: "8", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "2"}
	_, from = jobenv.JobPort(jobenv.Map(env))
	assert.Equal(t, "SLURM_JOB_ID=77 SLURM_STEP_ID=2", from)
	// The job step alone, without a step id (a batch script's).
	_, from = jobenv.JobPort(jobenv.Map(map[string]string{"SLURM_JOB_ID": "77"}))
	assert.Equal(t, "SLURM_JOB_ID=77", from)
}
