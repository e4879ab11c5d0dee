package tcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/xpu-go/xpu/comm"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds how long a rank takes to see that a silent peer
	// (dead host, cut link) is lost.
	DefaultTimeout = 10 * time.Second
	// DefaultEagerLimit is the largest message sent eagerly (without a
	// rendezvous round trip).
	DefaultEagerLimit = 64 << 10
	// DefaultEagerBudget is the eager bytes a rank accepts from one peer
	// before that peer's receives have taken them.
	DefaultEagerBudget = 4 << 20
	// DefaultChunk is the size of the data frames a large message travels
	// in, so that small messages are not held up behind it.
	DefaultChunk = 1 << 20
	// DefaultInitTimeout bounds FromEnv and the driver's Open when the
	// context has no deadline: the time for every rank to show up.
	DefaultInitTimeout = 5 * time.Minute
	// MaxRanks is the largest group.
	MaxRanks = 1 << 16
)

// Environment variables read by FromEnv (and by the driver's Open).
const (
	EnvRank       = "XPU_RANK"
	EnvWorldSize  = "XPU_WORLD_SIZE"
	EnvMasterAddr = "XPU_MASTER_ADDR"
	EnvMasterPort = "XPU_MASTER_PORT"
	EnvJobSecret  = "XPU_JOB_SECRET"
	// EnvTimeout overrides Config.Timeout: a Go duration ("3s").
	EnvTimeout = "XPU_TCP_TIMEOUT"
	// EnvSpin sets Config.Spin: a Go duration ("50us"), 0 to block.
	EnvSpin = "XPU_TCP_SPIN"
)

// Config describes this rank's place in a job. Rank, Size, MasterAddr and
// Secret are required; the rest have defaults.
type Config struct {
	// Rank of this process in [0, Size).
	Rank int
	// Size is the number of ranks of the job.
	Size int
	// MasterAddr is host:port of rank 0, which serves the rendezvous
	// store there and accepts peer links on the same port.
	MasterAddr string
	// Secret is the job's shared secret: peers prove they hold it (HMAC
	// challenge-response) before any other byte is exchanged. The empty
	// secret is refused.
	Secret []byte
	// Listener, when set on rank 0, is used instead of listening on
	// MasterAddr (tests pass a listener on port 0). Dial takes ownership.
	Listener net.Listener
	// AdvertiseHost is the host other ranks reach this rank at. The
	// default is the local address of this rank's connection to rank 0:
	// the interface that routes to the master.
	AdvertiseHost string
	// Timeout bounds failure detection: a peer silent for this long (no
	// data, no heartbeat) is lost, and so is one whose unacknowledged data
	// is older (TCP_USER_TIMEOUT on Linux). Zero means DefaultTimeout.
	Timeout time.Duration
	// Heartbeat is how often an idle link sends a heartbeat. Zero means
	// Timeout/4.
	Heartbeat time.Duration
	// CloseTimeout bounds how long Close waits for peers to acknowledge
	// the goodbye before cutting the links. Zero means min(Timeout, 5s).
	CloseTimeout time.Duration
	// EagerLimit is the largest message sent eagerly; larger ones go by
	// rendezvous and land straight in the receive buffer. Zero means
	// DefaultEagerLimit; negative sends every nonempty message by
	// rendezvous.
	EagerLimit int
	// EagerBudget is how many eager bytes this rank holds for one peer
	// before receives take them; a peer past it sends by rendezvous.
	// Zero means DefaultEagerBudget.
	EagerBudget int
	// Chunk is the size of data frames. Zero means DefaultChunk.
	Chunk int
	// Spin is how long a goroutine waiting for a receive polls the socket
	// before it blocks (Linux; elsewhere it blocks at once). Polling
	// trades a core for latency, as MPI libraries do by default: it pays
	// only where every rank has a core of its own, and costs dearly where
	// ranks share cores. Zero, the default, blocks at once.
	Spin time.Duration
	// Logf, when set, receives diagnostics (refused connections, lost
	// peers).
	Logf func(format string, args ...any)
}

// normalize validates cfg and fills in defaults.
func (cfg Config) normalize() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return cfg, opErr("dial", fmt.Errorf(format+": %w", append(args, comm.ErrInvalidArgument)...))
	}
	if cfg.Size < 1 || cfg.Size > MaxRanks {
		return bad("world size %d outside [1, %d]", cfg.Size, MaxRanks)
	}
	if cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return bad("rank %d outside [0, %d)", cfg.Rank, cfg.Size)
	}
	if len(cfg.Secret) == 0 {
		return bad("empty job secret (set %s)", EnvJobSecret)
	}
	if cfg.Size > 1 && cfg.MasterAddr == "" && (cfg.Rank != 0 || cfg.Listener == nil) {
		return bad("no master address")
	}
	if cfg.MasterAddr != "" {
		if _, _, err := net.SplitHostPort(cfg.MasterAddr); err != nil {
			return bad("master address %q: %v", cfg.MasterAddr, err)
		}
	}
	if cfg.Timeout < 0 || cfg.Heartbeat < 0 || cfg.CloseTimeout < 0 || cfg.EagerBudget < 0 || cfg.Chunk < 0 || cfg.Spin < 0 {
		return bad("negative timeout, spin, budget or chunk")
	}
	if cfg.Spin > maxSpin {
		return bad("spin %v above %v", cfg.Spin, maxSpin)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = cfg.Timeout / 4
	}
	if cfg.Heartbeat >= cfg.Timeout {
		return bad("heartbeat %v not below the timeout %v", cfg.Heartbeat, cfg.Timeout)
	}
	if cfg.CloseTimeout == 0 {
		cfg.CloseTimeout = min(cfg.Timeout, 5*time.Second)
	}
	switch {
	case cfg.EagerLimit == 0:
		cfg.EagerLimit = DefaultEagerLimit
	case cfg.EagerLimit < 0:
		cfg.EagerLimit = 0
	}
	if cfg.EagerBudget == 0 {
		cfg.EagerBudget = DefaultEagerBudget
	}
	if cfg.EagerLimit > cfg.EagerBudget {
		cfg.EagerLimit = cfg.EagerBudget
	}
	if cfg.EagerLimit > 1<<30 || cfg.EagerBudget > 1<<40 {
		return bad("eager limit %d or budget %d too large", cfg.EagerLimit, cfg.EagerBudget)
	}
	if cfg.Chunk == 0 {
		cfg.Chunk = DefaultChunk
	}
	if cfg.Chunk < 4096 || cfg.Chunk > 64<<20 {
		return bad("chunk of %d bytes outside [4 KiB, 64 MiB]", cfg.Chunk)
	}
	cfg.Secret = append([]byte(nil), cfg.Secret...)
	return cfg, nil
}

// FromEnv joins the job described by the environment (see ConfigFromEnv)
// and returns this process's rank. When ctx has no deadline, the ranks get
// DefaultInitTimeout to find each other.
func FromEnv(ctx context.Context) (*Comm, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultInitTimeout)
		defer cancel()
	}
	return Dial(ctx, cfg)
}

// launcherVars are the (rank, size) variable pairs FromEnv understands, in
// order of preference: xpu's own, Open MPI's, PMI's (MPICH, Intel MPI) and
// Slurm's.
var launcherVars = [][2]string{
	{EnvRank, EnvWorldSize},
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
	{"PMI_RANK", "PMI_SIZE"},
	{"SLURM_PROCID", "SLURM_NTASKS"},
}

// InJob reports whether the environment names a job: a rank and a world
// size of xpu run, mpirun, a PMI launcher or srun.
func InJob() bool {
	for _, v := range launcherVars {
		if os.Getenv(v[0]) != "" && os.Getenv(v[1]) != "" {
			return true
		}
	}
	return false
}

// ConfigFromEnv reads a Config from the environment:
//
//   - rank and size from XPU_RANK and XPU_WORLD_SIZE, else
//     OMPI_COMM_WORLD_RANK/SIZE (mpirun), PMI_RANK/PMI_SIZE, or
//     SLURM_PROCID/SLURM_NTASKS (srun);
//   - the master from XPU_MASTER_ADDR and XPU_MASTER_PORT (or MASTER_ADDR,
//     MASTER_PORT); under Slurm the first host of SLURM_NODELIST when it is
//     a plain list, else SLURM_LAUNCH_NODE_IPADDR; 127.0.0.1 when the
//     launcher says every rank is on this node; the port defaults to 29500;
//   - the secret from XPU_JOB_SECRET. Without it, a secret is derived from
//     the launcher's job identity (Slurm job and step, Open MPI or PMIx
//     namespace): that keeps other jobs out by accident, not an attacker
//     who can read the job id — set XPU_JOB_SECRET where that matters;
//   - Timeout from XPU_TCP_TIMEOUT.
func ConfigFromEnv() (Config, error) {
	var cfg Config
	found := false
	for _, v := range launcherVars {
		rs, ss := os.Getenv(v[0]), os.Getenv(v[1])
		if rs == "" && ss == "" {
			continue
		}
		r, err1 := strconv.Atoi(strings.TrimSpace(rs))
		s, err2 := strconv.Atoi(strings.TrimSpace(ss))
		if err1 != nil || err2 != nil {
			return cfg, envErr("%s=%q and %s=%q are not integers", v[0], rs, v[1], ss)
		}
		cfg.Rank, cfg.Size, found = r, s, true
		break
	}
	if !found {
		return cfg, envErr("no rank in the environment (set %s and %s, or run under mpirun or srun)", EnvRank, EnvWorldSize)
	}
	host := firstEnv(EnvMasterAddr, "MASTER_ADDR")
	if host == "" {
		host = slurmMaster()
	}
	if host == "" && allLocal(cfg.Size) {
		host = "127.0.0.1"
	}
	if host == "" && cfg.Size > 1 {
		return cfg, envErr("no master address (set %s to an address of rank 0's host)", EnvMasterAddr)
	}
	port := firstEnv(EnvMasterPort, "MASTER_PORT")
	if port == "" {
		port = "29500"
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return cfg, envErr("%s=%q is not a port", EnvMasterPort, port)
	}
	cfg.MasterAddr = net.JoinHostPort(host, port)
	if s := os.Getenv(EnvJobSecret); s != "" {
		cfg.Secret = []byte(s)
	} else if id := launcherJobID(); id != "" {
		sum := sha256.Sum256([]byte("xpu-go tcp job " + id))
		cfg.Secret = []byte(hex.EncodeToString(sum[:]))
	} else {
		return cfg, envErr("no job secret (set %s to the same random string on every rank)", EnvJobSecret)
	}
	if t := os.Getenv(EnvTimeout); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return cfg, envErr("%s=%q is not a positive duration", EnvTimeout, t)
		}
		cfg.Timeout = d
	}
	if t := os.Getenv(EnvSpin); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d < 0 || d > maxSpin {
			return cfg, envErr("%s=%q is not a duration in [0, %v]", EnvSpin, t, maxSpin)
		}
		cfg.Spin = d
	}
	return cfg, nil
}

// maxSpin bounds Config.Spin: a kick (a context ending, a cancel) reaches
// a polling waiter only when its poll ends.
const maxSpin = 10 * time.Millisecond

func envErr(format string, args ...any) error {
	return opErr("env", fmt.Errorf(format+": %w", append(args, comm.ErrInvalidArgument)...))
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// slurmMaster returns the first host of SLURM_NODELIST when the list is
// simple ("a,b", "node[01-04,07]", "n1"), else SLURM_LAUNCH_NODE_IPADDR.
func slurmMaster() string {
	if os.Getenv("SLURM_PROCID") == "" {
		return ""
	}
	if h := firstHost(os.Getenv("SLURM_NODELIST")); h != "" {
		return h
	}
	return strings.TrimSpace(os.Getenv("SLURM_LAUNCH_NODE_IPADDR"))
}

// firstHost expands the first entry of a Slurm host list in its simple
// forms; it returns "" for forms it does not understand.
func firstHost(list string) string {
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

// allLocal reports whether the launcher says all size ranks run on this
// node.
func allLocal(size int) bool {
	if size == 1 {
		return true
	}
	for _, v := range []string{"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"} {
		if n, err := strconv.Atoi(os.Getenv(v)); err == nil && n == size {
			return true
		}
	}
	return os.Getenv("SLURM_NNODES") == "1"
}

// launcherJobID returns an identity of the job shared by its ranks.
func launcherJobID() string {
	if j := os.Getenv("SLURM_JOB_ID"); j != "" {
		return "slurm " + j + "." + os.Getenv("SLURM_STEP_ID")
	}
	for _, v := range []string{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_KVSNAME"} {
		if j := os.Getenv(v); j != "" {
			return v + " " + j
		}
	}
	return ""
}
