package tcp

import (
	"context"

	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/comm"
)

// Name is the backend's former name, which stays an alias of procs.Name.
//
// Deprecated: use procs.Name.
const Name = "tcp"

// Comm is procs.Comm.
//
// Deprecated: use procs.Comm.
type Comm = procs.Comm

// Config is procs.Config.
//
// Deprecated: use procs.Config.
type Config = procs.Config

// LinkMode is procs.LinkMode.
//
// Deprecated: use procs.LinkMode.
type LinkMode = procs.LinkMode

// The constants of procs, each under its name there: defaults and limits,
// the environment variables it reads, the options its Open reads, the link
// modes and the transports Comm.Transport reports.
//
// Deprecated: use procs' constants of the same names.
const (
	DefaultTimeout       = procs.DefaultTimeout
	DefaultEagerLimit    = procs.DefaultEagerLimit
	DefaultEagerBudget   = procs.DefaultEagerBudget
	DefaultSpin          = procs.DefaultSpin
	DefaultShmSpin       = procs.DefaultShmSpin
	DefaultChunk         = procs.DefaultChunk
	DefaultJoinTimeout   = procs.DefaultJoinTimeout
	JoinProgressInterval = procs.JoinProgressInterval
	DefaultMasterPort    = procs.DefaultMasterPort
	DefaultShmRing       = procs.DefaultShmRing
	MaxRanks             = procs.MaxRanks
	MaxEagerLimit        = procs.MaxEagerLimit
	MaxEagerBudget       = procs.MaxEagerBudget
	EnvRank              = procs.EnvRank
	EnvWorldSize         = procs.EnvWorldSize
	EnvMasterAddr        = procs.EnvMasterAddr
	EnvMasterPort        = procs.EnvMasterPort
	EnvJobSecret         = procs.EnvJobSecret
	EnvTimeout           = procs.EnvTimeout
	EnvSpin              = procs.EnvSpin
	EnvLinks             = procs.EnvLinks
	EnvNode              = procs.EnvNode
	EnvShmRing           = procs.EnvShmRing
	EnvShmSpin           = procs.EnvShmSpin
	EnvJoinTimeout       = procs.EnvJoinTimeout
	OptTimeout           = procs.OptTimeout
	OptEagerLimit        = procs.OptEagerLimit
	OptEagerBudget       = procs.OptEagerBudget
	OptJoinTimeout       = procs.OptJoinTimeout
	OptLinks             = procs.OptLinks
	OptShmRing           = procs.OptShmRing
	LinkAuto             = procs.LinkAuto
	LinkTCP              = procs.LinkTCP
	LinkShm              = procs.LinkShm
	TransportSelf        = procs.TransportSelf
	TransportTCP         = procs.TransportTCP
	TransportShm         = procs.TransportShm
)

// The sentinels of job formation.
//
// Deprecated: use procs' variables of the same names.
var (
	ErrAuth        = procs.ErrAuth
	ErrJoinTimeout = procs.ErrJoinTimeout
	ErrProtocol    = procs.ErrProtocol
)

// Dial calls procs.Dial.
//
// Deprecated: use procs.Dial.
func Dial(ctx context.Context, cfg Config) (*Comm, error) { return procs.Dial(ctx, cfg) }

// FromEnv calls procs.FromEnv.
//
// Deprecated: use procs.FromEnv.
func FromEnv(ctx context.Context) (*Comm, error) { return procs.FromEnv(ctx) }

// ConfigFromEnv calls procs.ConfigFromEnv.
//
// Deprecated: use procs.ConfigFromEnv.
func ConfigFromEnv() (Config, error) { return procs.ConfigFromEnv() }

// InJob calls procs.InJob.
//
// Deprecated: use procs.InJob.
func InJob() bool { return procs.InJob() }

// GroupFunc calls procs.GroupFunc.
//
// Deprecated: use procs.GroupFunc.
func GroupFunc(tmpl Config) comm.GroupFunc { return procs.GroupFunc(tmpl) }

// NewLoopbackGroup calls procs.NewLoopbackGroup.
//
// Deprecated: use procs.NewLoopbackGroup.
func NewLoopbackGroup(ctx context.Context, n int) ([]*Comm, error) {
	return procs.NewLoopbackGroup(ctx, n)
}

// NewLoopbackGroupConfig calls procs.NewLoopbackGroupConfig.
//
// Deprecated: use procs.NewLoopbackGroupConfig.
func NewLoopbackGroupConfig(ctx context.Context, n int, tmpl Config) ([]*Comm, error) {
	return procs.NewLoopbackGroupConfig(ctx, n, tmpl)
}

// ParseLinkMode calls procs.ParseLinkMode.
//
// Deprecated: use procs.ParseLinkMode.
func ParseLinkMode(s string) (LinkMode, error) { return procs.ParseLinkMode(s) }
