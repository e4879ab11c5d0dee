package jobenv

import (
	"hash/fnv"
	"strings"
)

// Rank 0's port, when no variable sets it.
const (
	// DefaultMasterPort is the port of a job that no launcher names:
	// PyTorch's, 29500.
	DefaultMasterPort = 29500
	// MinJobPort and MaxJobPort bound the ports JobPort derives from a job's
	// identity. The range lies below the ephemeral ports the kernel hands
	// out to outgoing connections (32768-60999 on Linux), so that no
	// client socket holds the port of a job about to start.
	MinJobPort = 20000
	MaxJobPort = 29999
)

// JobPort returns the port rank 0 of the job the environment names listens
// on when no variable sets one: a hash of the job's identity into
// [MinJobPort, MaxJobPort], so that jobs started side by side on one host
// (two Slurm steps, two mpiruns) get different ports, and every rank of one
// job the same.
//
// The identity is the values of the JobIDs variables of the launcher that
// placed this process (Find) — Slurm's job and step, Open MPI's job id,
// the PMIx namespace — or, when that launcher names no job (xpu's own
// variables set by hand), of the first launcher after it in Launchers that
// does. Only the placing launcher's own identity is taken when it has one:
// an mpirun inside a Slurm allocation starts ranks that agree on Open MPI's
// job id but not always on Slurm's step.
//
// from says what the port was derived from, for messages
// ("SLURM_JOB_ID=12 SLURM_STEP_ID=3"); it is "" and the port
// DefaultMasterPort when no launcher names the job. Two jobs get the same
// port with a chance of one in 10,000; XPU_MASTER_PORT sets one instead.
func JobPort(env Getenv) (port int, from string) {
	first := 0
	if p, ok, err := Find(env); ok && err == nil {
		for i, l := range Launchers {
			if l.Name == p.Launcher {
				first = i
			}
		}
	}
	for _, l := range Launchers[first:] {
		var ids []string
		for _, v := range l.JobIDs {
			if val := strings.TrimSpace(env(v)); val != "" {
				ids = append(ids, v+"="+val)
			}
		}
		if len(ids) == 0 {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte("xpu-go master port\x00" + l.Name))
		for _, id := range ids {
			h.Write([]byte{0})
			h.Write([]byte(id))
		}
		return MinJobPort + int(h.Sum64()%(MaxJobPort-MinJobPort+1)), strings.Join(ids, " ")
	}
	return DefaultMasterPort, ""
}
