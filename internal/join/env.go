package join

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/xerr"
)

// Env is what the launcher's variables say of this process's job: every
// transport that joins through this package reads them alike.
type Env struct {
	// Rank and Size place this process in its job.
	Rank, Size int
	// MasterAddr is host:port of rank 0; PortFrom says where the port
	// came from (Config.PortFrom).
	MasterAddr, PortFrom string
	// Secret is the job's secret.
	Secret []byte
	// JoinTimeout is XPU_JOIN_TIMEOUT's value, zero when it is unset.
	JoinTimeout time.Duration
}

// InJob reports whether env names a job: a rank and a world size of xpu
// run, mpirun, a PMIx or PMI launcher, or srun.
func InJob(env jobenv.Getenv) bool { return jobenv.InJob(env) }

// FromEnv reads this process's job from env, for backend (which names
// itself in errors):
//
//   - rank and size from the first launcher of jobenv.Launchers that set
//     both: XPU_RANK and XPU_WORLD_SIZE (xpu run), else
//     OMPI_COMM_WORLD_RANK/SIZE (mpirun), PMIX_RANK/PMIX_SIZE,
//     PMI_RANK/PMI_SIZE, or SLURM_PROCID/SLURM_NTASKS (srun); variables
//     set but not a rank of a job are an error;
//   - the master from XPU_MASTER_ADDR and XPU_MASTER_PORT (or MASTER_ADDR,
//     MASTER_PORT); under Slurm the first host of SLURM_NODELIST when it is
//     a plain list, else SLURM_LAUNCH_NODE_IPADDR; 127.0.0.1 when the
//     launcher says every rank is on this node. Without a port set, the
//     port is derived from the launcher's job identity (Slurm's job and
//     step, Open MPI's job id, the PMIx namespace) into 20000-29999, so
//     that two jobs on one node do not collide (jobenv.JobPort); it is
//     jobenv.DefaultMasterPort, 29500, only when the launcher names no job;
//   - the secret from XPU_JOB_SECRET. Without it, a secret is derived from
//     the launcher's job identity (Slurm job and step, Open MPI or PMIx
//     namespace): that keeps other jobs out by accident, not an attacker
//     who can read the job id — set XPU_JOB_SECRET where that matters;
//   - the join timeout from XPU_JOIN_TIMEOUT.
func FromEnv(backend string, env jobenv.Getenv) (Env, error) {
	var e Env
	bad := func(format string, args ...any) (Env, error) {
		return e, xerr.Errorf(backend, "env", xerr.ErrInvalidArgument, format, args...)
	}
	place, ok, err := jobenv.Find(env)
	if err != nil {
		return e, err
	}
	if !ok {
		return bad("no rank in the environment (set %s and %s, or run under mpirun or srun)", jobenv.Rank, jobenv.WorldSize)
	}
	e.Rank, e.Size = place.Rank, place.Size
	host := firstEnv(env, jobenv.MasterAddr, "MASTER_ADDR")
	if host == "" {
		host = slurmMaster(env)
	}
	if host == "" && jobenv.AllLocal(env, e.Size) {
		host = "127.0.0.1"
	}
	if host == "" && e.Size > 1 {
		return bad("no master address (set %s to an address of rank 0's host)", jobenv.MasterAddr)
	}
	portVar, port := jobenv.MasterPort, strings.TrimSpace(env(jobenv.MasterPort))
	if port == "" {
		portVar, port = "MASTER_PORT", strings.TrimSpace(env("MASTER_PORT"))
	}
	if port != "" {
		e.PortFrom = "set by " + portVar
	} else {
		p, from := jobenv.JobPort(env)
		port, e.PortFrom = strconv.Itoa(p), "derived from "+from
		if from == "" {
			e.PortFrom = "the default, as the launcher names no job"
		}
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return bad("%s=%q is not a port", portVar, port)
	}
	e.MasterAddr = net.JoinHostPort(host, port)
	if s := env(jobenv.JobSecret); s != "" {
		e.Secret = []byte(s)
	} else if id := jobenv.JobID(env); id != "" {
		// The derivation keeps the words of its first version, so that
		// ranks of one job derive one secret whichever transport joins.
		sum := sha256.Sum256([]byte("xpu-go tcp job " + id))
		e.Secret = []byte(hex.EncodeToString(sum[:]))
	} else {
		return bad("no job secret (set %s to the same random string on every rank)", jobenv.JobSecret)
	}
	if e.JoinTimeout, err = TimeoutFromEnv(env); err != nil {
		return e, xerr.Op(backend, "env", err)
	}
	return e, nil
}

func firstEnv(env jobenv.Getenv, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(env(n)); v != "" {
			return v
		}
	}
	return ""
}

// slurmMaster returns the first host of SLURM_NODELIST when the list is
// simple ("a,b", "node[01-04,07]", "n1"), else SLURM_LAUNCH_NODE_IPADDR.
func slurmMaster(env jobenv.Getenv) string {
	if env("SLURM_PROCID") == "" {
		return ""
	}
	if h := FirstHost(env("SLURM_NODELIST")); h != "" {
		return h
	}
	return strings.TrimSpace(env("SLURM_LAUNCH_NODE_IPADDR"))
}

// FirstHost expands the first entry of a Slurm host list in its simple
// forms; it returns "" for forms it does not understand.
func FirstHost(list string) string {
	list = strings.TrimSpace(list)
	if list == "" {
		return ""
	}
	// The first entry ends at a comma outside brackets.
	depth, end := 0, len(list)
	for i, ch := range list {
		switch ch {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 && end == len(list) {
				end = i
			}
		}
	}
	first := list[:end]
	open := strings.IndexByte(first, '[')
	if open < 0 {
		if strings.ContainsAny(first, "]") {
			return ""
		}
		return first
	}
	if !strings.HasSuffix(first, "]") || strings.Count(first, "[") != 1 {
		return ""
	}
	prefix, ranges := first[:open], first[open+1:len(first)-1]
	lo, _, _ := strings.Cut(strings.Split(ranges, ",")[0], "-")
	if lo == "" || strings.Trim(lo, "0123456789") != "" {
		return ""
	}
	return prefix + lo
}
