package procs

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/internal/shm"
	"github.com/xpu-go/xpu/xerr"
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
	// DefaultSpin is Config.Spin's default: a waiter on a TCP link blocks
	// at once.
	DefaultSpin = 0
	// DefaultShmSpin is Config.ShmSpin's default: how long a waiter polls
	// a shared-memory link before it sleeps.
	DefaultShmSpin = 50 * time.Microsecond
	// DefaultChunk is the size of the data frames a large message travels
	// in, so that small messages are not held up behind it.
	DefaultChunk = 1 << 20
	// DefaultJoinTimeout bounds Dial, FromEnv and the driver's Open: the
	// time for every rank to show up and connect, counted from this rank's
	// start (Config.JoinTimeout, XPU_JOIN_TIMEOUT, the option join_timeout
	// set another). The context given bounds joining too: whichever ends
	// first.
	DefaultJoinTimeout = 60 * time.Second
	// JoinProgressInterval is how often a rank still joining logs what it
	// waits for (Config.Logger).
	JoinProgressInterval = 5 * time.Second
	// DefaultMasterPort is rank 0's port when no variable sets it and the
	// launcher names no job; see ConfigFromEnv.
	DefaultMasterPort = 29500
	// DefaultShmRing is the size of each ring of a shared-memory link:
	// large messages do not go through it where the kernel allows a
	// single copy, and 256 KiB measured as fast as 1 MiB for every case of
	// tcpbench (docs/results/shm.md), at a quarter of the memory per pair.
	DefaultShmRing = 256 << 10
	// MaxRanks is the largest group.
	MaxRanks = 1 << 16
)

// Bounds of Config, and of the options that set its fields.
const (
	// MaxEagerLimit is the largest Config.EagerLimit.
	MaxEagerLimit = 1 << 30
	// MaxEagerBudget is the largest Config.EagerBudget.
	MaxEagerBudget = 1 << 40
	// minChunk and maxChunk bound Config.Chunk.
	minChunk, maxChunk = 4 << 10, 64 << 20
	// maxSpin bounds Config.Spin: a kick (a context ending, a cancel)
	// reaches a polling waiter only when its poll ends.
	maxSpin = 10 * time.Millisecond
)

// Environment variables read by FromEnv (and by the driver's Open). The
// first five are the variables `xpu run` sets.
const (
	// EnvRank holds this process's rank, 0 … size-1 (XPU_RANK).
	EnvRank = "XPU_RANK"
	// EnvWorldSize holds the number of ranks of the job (XPU_WORLD_SIZE).
	EnvWorldSize = "XPU_WORLD_SIZE"
	// EnvMasterAddr holds the host of rank 0, which serves the rendezvous
	// store and accepts peer links (XPU_MASTER_ADDR).
	EnvMasterAddr = "XPU_MASTER_ADDR"
	// EnvMasterPort holds its port (XPU_MASTER_PORT).
	EnvMasterPort = "XPU_MASTER_PORT"
	// EnvJobSecret holds the secret every rank of the job proves it holds
	// (XPU_JOB_SECRET).
	EnvJobSecret = "XPU_JOB_SECRET"
	// EnvTimeout overrides Config.Timeout: a Go duration ("3s").
	EnvTimeout = "XPU_TCP_TIMEOUT"
	// EnvSpin sets Config.Spin: a Go duration ("50us"); 0 or negative
	// never polls.
	EnvSpin = "XPU_TCP_SPIN"
	// EnvLinks sets Config.Links: "auto", "tcp" or "shm" (XPU_LINKS).
	EnvLinks = "XPU_LINKS"
	// EnvNode sets Config.Node (XPU_NODE).
	EnvNode = "XPU_NODE"
	// EnvShmRing sets Config.ShmRing: a size in bytes ("256K", "1M"),
	// a power of two from 4 KiB to 64 MiB.
	EnvShmRing = "XPU_SHM_RING"
	// EnvShmSpin sets Config.ShmSpin: a Go duration ("20us"); 0 or
	// negative sleeps at once.
	EnvShmSpin = "XPU_SHM_SPIN"
	// EnvJoinTimeout sets Config.JoinTimeout: a positive Go duration
	// ("90s"). Every transport that joins a job reads it.
	EnvJoinTimeout = "XPU_JOIN_TIMEOUT"
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
	// EagerLimit is the largest message sent eagerly, at most
	// MaxEagerLimit; larger ones go by rendezvous and land straight in
	// the receive buffer. Zero means DefaultEagerLimit; negative sends
	// every nonempty message by rendezvous. A limit above EagerBudget is
	// lowered to it.
	EagerLimit int
	// EagerBudget is how many eager bytes this rank holds for one peer
	// before receives take them, at most MaxEagerBudget; a peer past it
	// sends by rendezvous. Zero means DefaultEagerBudget; negative is an
	// error.
	EagerBudget int
	// Chunk is the size of data frames, from 4 KiB to 64 MiB. Zero means
	// DefaultChunk.
	Chunk int
	// Spin is how long a goroutine waiting for a receive polls the socket
	// before it blocks (Linux; elsewhere it blocks at once). Polling
	// trades a core for latency, as MPI libraries do by default: it pays
	// only where every rank has a core of its own, and costs dearly where
	// ranks share cores. Zero means DefaultSpin, which is no polling;
	// negative never polls (the rule of every spin setting, see
	// docs/launching.md).
	Spin time.Duration
	// Links says which links this rank makes: LinkAuto (the default)
	// links the ranks of one node through shared memory and the others
	// through TCP; LinkTCP and LinkShm force one kind. A rank that forces
	// shared memory fails to join a job with a rank on another node, or
	// with a rank that forces TCP.
	Links LinkMode
	// Node names this rank's node for the choice of links, beside the
	// machine and PID namespace, which are always compared: ranks with
	// different Nodes never share memory (to test mixed jobs on one
	// machine, or to keep ranks apart). Empty by default.
	Node string
	// ShmRing is the size of each ring of a shared-memory link, a power
	// of two from 4 KiB to 64 MiB; a link's rings take the larger of its
	// two ranks'. Zero means DefaultShmRing.
	ShmRing int
	// ShmSpin is how long a goroutine that waits on a shared-memory link
	// polls it before it sleeps. Zero means DefaultShmSpin (50 µs);
	// negative sleeps at once. Once the job has formed, a rank whose node
	// has more ranks than this process has processors gives the processor
	// away (sched_yield) at every poll.
	ShmSpin time.Duration
	// JoinTimeout bounds Dial: when the job has not formed within it
	// (rank 0 never answered, a rank never joined or never connected),
	// Dial fails with an error matching ErrJoinTimeout that names what was
	// missing. Zero means DefaultJoinTimeout; negative means no bound but
	// the context's.
	JoinTimeout time.Duration
	// Logger receives the progress of Dial: a line every
	// JoinProgressInterval while it waits, naming what for (rank 0, or the
	// ranks missing) and for how long. Nil means slog.Default().
	Logger *slog.Logger
	// Logf, when set, receives diagnostics (refused connections, lost
	// peers).
	Logf func(format string, args ...any)

	// portFrom says where ConfigFromEnv took the master's port from, for
	// the error of a port in use.
	portFrom string
	// nodeOf, when set, gives each rank of a loopback group its Node, so
	// that tests make mixed groups in one process.
	nodeOf func(rank int) string
	// idleCheck, when set, replaces the reader goroutines' idleCheck, so
	// that tests can make any progress that waits for it hang.
	idleCheck time.Duration
	// singleCopyMin, when set, replaces cmaMin, so that tests make single
	// copies of smaller messages.
	singleCopyMin int
	// noDirect, when set, publishes no region in the links' directories,
	// so that tests make one-sided transfers by frames.
	noDirect bool
}

// normalize validates cfg and fills in defaults. It is the one check of a
// Config's values: the driver's options are read within the same bounds.
func (cfg Config) normalize() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return cfg, xerr.Errorf(Name, "dial", xerr.ErrInvalidArgument, format, args...)
	}
	if err := cfg.checkPlace(); err != nil {
		return cfg, err
	}
	if cfg.Timeout < 0 || cfg.Heartbeat < 0 || cfg.CloseTimeout < 0 || cfg.EagerBudget < 0 || cfg.Chunk < 0 {
		return bad("negative timeout, budget or chunk")
	}
	if cfg.Spin < 0 {
		cfg.Spin = 0 // never polls
	}
	if cfg.Spin > maxSpin || cfg.ShmSpin > maxSpin {
		return bad("spin %v above %v", max(cfg.Spin, cfg.ShmSpin), maxSpin)
	}
	if cfg.Links > LinkShm {
		return bad("link mode %v", cfg.Links)
	}
	if cfg.ShmSpin == 0 {
		cfg.ShmSpin = DefaultShmSpin
	}
	if cfg.ShmRing == 0 {
		cfg.ShmRing = DefaultShmRing
	}
	if cfg.ShmRing < shm.MinRing || cfg.ShmRing > shm.MaxRing || cfg.ShmRing&(cfg.ShmRing-1) != 0 {
		return bad("shared-memory ring of %d bytes: not a power of two in [%s, %s]", cfg.ShmRing,
			xpu.FormatBytes(shm.MinRing), xpu.FormatBytes(shm.MaxRing))
	}
	if cfg.EagerLimit > MaxEagerLimit {
		return bad("eager limit of %d bytes above %s", cfg.EagerLimit, xpu.FormatBytes(MaxEagerLimit))
	}
	if cfg.EagerBudget > MaxEagerBudget {
		return bad("eager budget of %d bytes above %s", cfg.EagerBudget, xpu.FormatBytes(MaxEagerBudget))
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
	if cfg.Chunk == 0 {
		cfg.Chunk = DefaultChunk
	}
	if cfg.Chunk < minChunk || cfg.Chunk > maxChunk {
		return bad("chunk of %d bytes outside [%s, %s]", cfg.Chunk, xpu.FormatBytes(minChunk), xpu.FormatBytes(maxChunk))
	}
	cfg.Secret = append([]byte(nil), cfg.Secret...)
	return cfg, nil
}

// checkPlace checks the rank's place in its job: rank, size, secret and
// master.
func (cfg Config) checkPlace() error {
	bad := func(format string, args ...any) error {
		return xerr.Errorf(Name, "dial", xerr.ErrInvalidArgument, format, args...)
	}
	switch {
	case cfg.Size < 1 || cfg.Size > MaxRanks:
		return bad("world size %d outside [1, %d]", cfg.Size, MaxRanks)
	case cfg.Rank < 0 || cfg.Rank >= cfg.Size:
		return bad("rank %d outside [0, %d)", cfg.Rank, cfg.Size)
	case len(cfg.Secret) == 0:
		return bad("empty job secret (set %s)", EnvJobSecret)
	case cfg.Size > 1 && cfg.MasterAddr == "" && (cfg.Rank != 0 || cfg.Listener == nil):
		return bad("no master address")
	}
	if cfg.MasterAddr != "" {
		if _, _, err := net.SplitHostPort(cfg.MasterAddr); err != nil {
			return bad("master address %q: %w", cfg.MasterAddr, err)
		}
	}
	return nil
}

// FromEnv joins the job described by the environment (see ConfigFromEnv)
// and returns this process's rank. Joining is bounded by the join timeout
// (DefaultJoinTimeout, or XPU_JOIN_TIMEOUT) and by ctx, whichever ends
// first.
func FromEnv(ctx context.Context) (*Comm, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return Dial(ctx, cfg)
}

// ConfigFromEnv reads a Config from the environment:
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
//     DefaultMasterPort, 29500, only when the launcher names no job;
//   - the secret from XPU_JOB_SECRET. Without it, a secret is derived from
//     the launcher's job identity (Slurm job and step, Open MPI or PMIx
//     namespace): that keeps other jobs out by accident, not an attacker
//     who can read the job id — set XPU_JOB_SECRET where that matters;
//   - Timeout from XPU_TCP_TIMEOUT, Spin from XPU_TCP_SPIN, JoinTimeout
//     from XPU_JOIN_TIMEOUT, Links from XPU_LINKS, Node from XPU_NODE,
//     ShmRing from XPU_SHM_RING, ShmSpin from XPU_SHM_SPIN.
func ConfigFromEnv() (Config, error) {
	var cfg Config
	job, err := join.FromEnv(Name, jobenv.OS)
	if err != nil {
		return cfg, err
	}
	cfg.Rank, cfg.Size, cfg.MasterAddr, cfg.portFrom = job.Rank, job.Size, job.MasterAddr, job.PortFrom
	cfg.Secret, cfg.JoinTimeout = job.Secret, job.JoinTimeout
	if t := os.Getenv(EnvTimeout); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return cfg, xerr.Errorf(Name, "env", xerr.ErrInvalidArgument, "%s=%q is not a positive duration", EnvTimeout, t)
		}
		cfg.Timeout = d
	}
	if cfg.Links, err = ParseLinkMode(os.Getenv(EnvLinks)); err != nil {
		return cfg, xerr.Errorf(Name, "env", xerr.ErrInvalidArgument, "%s=%q is not auto, tcp or shm", EnvLinks, os.Getenv(EnvLinks))
	}
	cfg.Node = strings.TrimSpace(os.Getenv(EnvNode))
	if cfg.ShmSpin, err = jobenv.Spin(jobenv.OS, EnvShmSpin, maxSpin); err != nil {
		return cfg, xerr.Op(Name, "env", err)
	}
	if cfg.Spin, err = jobenv.Spin(jobenv.OS, EnvSpin, maxSpin); err != nil {
		return cfg, xerr.Op(Name, "env", err)
	}
	if v := strings.TrimSpace(os.Getenv(EnvShmRing)); v != "" {
		r := xpu.Options{OptShmRing: v}.Reader(Name)
		n := r.Bytes(OptShmRing, 0, shm.MinRing, shm.MaxRing)
		if r.Err() != nil || n&(n-1) != 0 {
			return cfg, xerr.Errorf(Name, "env", xerr.ErrInvalidArgument, "%s=%q is not a power of two from 4 KiB to 64 MiB", EnvShmRing, v)
		}
		cfg.ShmRing = int(n)
	}
	return cfg, nil
}

// InJob reports whether the environment names a job: a rank and a world
// size of xpu run, mpirun, a PMIx or PMI launcher, or srun (the launchers
// ConfigFromEnv understands). The driver's Open joins the job when it does.
func InJob() bool { return jobenv.InJob(jobenv.OS) }
