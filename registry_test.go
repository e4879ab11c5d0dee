package xpu_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/xerr"
)

// fakeDriver opens when err is nil and counts its tries, opens and closes.
type fakeDriver struct {
	name   string
	err    error
	tries  int
	opens  int
	closes int
}

func (d *fakeDriver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	d.tries++
	if d.err != nil {
		return nil, d.err
	}
	d.opens++
	b := &xpu.Backend{}
	b.OnClose(func() error { d.closes++; return nil })
	return b, nil
}

func (d *fakeDriver) Info(ctx context.Context) xpu.Info {
	return xpu.Info{Available: d.err == nil, Reason: fmt.Sprint(d.err)}
}

func register(t *testing.T, name string, d xpu.Driver) {
	t.Helper()
	xpu.Register(name, d)
	t.Cleanup(func() { xpu.Unregister(name) })
}

func TestRegisterPanics(t *testing.T) {
	assert.PanicsWithValue(t, "xpu: Register driver is nil", func() { xpu.Register("t-nil", nil) })
	assert.Panics(t, func() { xpu.Register("", &fakeDriver{}) })
	assert.Panics(t, func() { xpu.Register("a,b", &fakeDriver{}) }, "a comma would break XPU_BACKEND chains")
	assert.PanicsWithValue(t, `xpu: Register with an invalid name "a.b"`, func() { xpu.Register("a.b", &fakeDriver{}) },
		"a dot would break scoped options")
	assert.Panics(t, func() { xpu.Register("a/b", &fakeDriver{}) }, "a slash would split test names")
	register(t, "t-dup", &fakeDriver{})
	assert.PanicsWithValue(t, "xpu: Register called twice for driver t-dup", func() { xpu.Register("t-dup", &fakeDriver{}) })
}

func TestDriversSorted(t *testing.T) {
	register(t, "t-zz", &fakeDriver{})
	register(t, "t-aa", &fakeDriver{})
	names := xpu.Drivers()
	assert.IsNonDecreasing(t, names)
	assert.Contains(t, names, "t-aa")
	assert.Contains(t, names, "t-zz")
}

// An unknown name is one line that lists every name a program could open
// — the drivers it links, their aliases and the backends of this module —
// and suggests the nearest.
func TestOpenUnknown(t *testing.T) {
	register(t, "t-known", &fakeDriver{})
	require.Equal(t, []string{"cpu", "t-known"}, xpu.Drivers(), "this test binary links cpu alone")
	for name, want := range map[string]string{
		"t-zzzzzz": `xpu open: unknown backend "t-zzzzzz"; known: cpu, cuda, local, mpi, procs, rdma, t-known, tcp`,
		"t-knwon":  `xpu open: unknown backend "t-knwon" (did you mean t-known?); known: cpu, cuda, local, mpi, procs, rdma, t-known, tcp`,
		"cdua":     `xpu open: unknown backend "cdua" (did you mean cuda?); known: cpu, cuda, local, mpi, procs, rdma, t-known, tcp`,
		"":         `xpu open: unknown backend ""; known: cpu, cuda, local, mpi, procs, rdma, t-known, tcp`,
	} {
		_, err := xpu.Open(context.Background(), name, nil)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, xpu.ErrUnknownBackend)
		assert.ErrorIs(t, err, xpu.ErrInvalidArgument)
		assert.Equal(t, want, err.Error())
		var xe *xerr.Error
		require.ErrorAs(t, err, &xe)
		assert.Equal(t, "xpu", xe.Backend)
	}
}

// A backend of this module that the program does not link is unknown to
// it, and the error says which import links it in — the former name of
// procs included.
func TestOpenNotLinked(t *testing.T) {
	for name, pkg := range map[string]string{
		"cuda": "backends/cuda", "mpi": "backends/mpi", "rdma": "backends/rdma", "local": "backends/local",
		"procs": "backends/procs", "tcp": "backends/procs",
	} {
		_, err := xpu.Open(context.Background(), name, nil)
		assert.ErrorIs(t, err, xpu.ErrUnknownBackend)
		assert.Equal(t, `xpu open: unknown backend "`+name+`": not linked into this program; add import _ "github.com/xpu-go/xpu/`+pkg+`"`,
			err.Error())
	}
}

func TestOpenAndClose(t *testing.T) {
	d := &fakeDriver{}
	register(t, "t-open", d)
	b, err := xpu.Open(context.Background(), "t-open", nil)
	require.NoError(t, err)
	assert.Equal(t, "t-open", b.Name, "Open names the backend")
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "a second Close runs nothing")
	assert.Equal(t, 1, d.closes)

	down := &fakeDriver{err: fmt.Errorf("no device: %w", xpu.ErrUnavailable)}
	register(t, "t-down", down)
	_, err = xpu.Open(context.Background(), "t-down", nil)
	assert.ErrorIs(t, err, xpu.ErrUnavailable)
	assert.Contains(t, err.Error(), "no device", "the reason is kept")
	assert.Equal(t, "t-down open: no device: backend unavailable", err.Error())
}

// A driver's own *xerr.Error names the backend already: Open returns it as
// it is, so the backend is named once. Any other error is wrapped as the
// backend's "open".
func TestOpenDriverErrors(t *testing.T) {
	own := xerr.Errorf("t-own", "open", xpu.ErrUnavailable, "no device")
	register(t, "t-own", &fakeDriver{err: own})
	_, err := xpu.Open(context.Background(), "t-own", nil)
	assert.Same(t, own, err, "returned unwrapped")
	assert.Equal(t, "t-own open: no device: backend unavailable", err.Error())

	// Wrapped deeper, it still names the backend.
	deep := fmt.Errorf("probe: %w", xerr.Op("t-deep", "init", xpu.ErrUnavailable))
	register(t, "t-deep", &fakeDriver{err: deep})
	_, err = xpu.Open(context.Background(), "t-deep", nil)
	assert.Same(t, deep, err)
	assert.Equal(t, "probe: t-deep init: backend unavailable", err.Error())

	// An *xerr.Error of another place does not name this backend.
	other := xerr.Errorf("env", "xpu", xpu.ErrInvalidArgument, "XPU_RANK=%q", "x")
	register(t, "t-other", &fakeDriver{err: other})
	_, err = xpu.Open(context.Background(), "t-other", nil)
	assert.ErrorIs(t, err, xpu.ErrInvalidArgument)
	assert.Equal(t, `t-other open: env xpu: XPU_RANK="x": invalid argument`, err.Error())
	var xe *xerr.Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, xerr.Error{Backend: "t-other", Device: -1, Op: "open", Err: other}, *xe)

	plain := errors.New("libfake.so: cannot open shared object file")
	register(t, "t-plain", &fakeDriver{err: plain})
	_, err = xpu.Open(context.Background(), "t-plain", nil)
	assert.ErrorIs(t, err, plain)
	assert.Equal(t, "t-plain open: libfake.so: cannot open shared object file", err.Error())

	for _, name := range []string{"t-own", "t-deep", "t-other", "t-plain"} {
		_, err := xpu.Open(context.Background(), name, nil)
		assert.NotContains(t, err.Error(), "\n", name)
		assert.Equal(t, 1, strings.Count(err.Error(), name), "%s is named once: %v", name, err)
	}
}

func TestCloseJoinsErrorsButNotErrClosed(t *testing.T) {
	b := &xpu.Backend{}
	boom := errors.New("boom")
	var order []int
	b.OnClose(func() error { order = append(order, 1); return boom })
	b.OnClose(func() error { order = append(order, 2); return fmt.Errorf("space: %w", xpu.ErrClosed) })
	err := b.Close()
	assert.ErrorIs(t, err, boom)
	assert.NotErrorIs(t, err, xpu.ErrClosed, "a component already closed is not an error")
	assert.Equal(t, []int{2, 1}, order, "closers run in reverse order")
}

// noJob clears the variables of every launcher and EnvBackend, so that a
// test starts outside any job whatever the environment it runs in.
func noJob(t *testing.T) {
	t.Helper()
	for _, l := range jobenv.Launchers {
		t.Setenv(l.Rank, "")
		t.Setenv(l.Size, "")
	}
	t.Setenv("SLURM_STEP_ID", "")
	t.Setenv("SLURM_STEPID", "")
	t.Setenv(xpu.EnvBackend, "")
}

func TestOpenDefaultChain(t *testing.T) {
	noJob(t)
	down := &fakeDriver{err: fmt.Errorf("libfake.so not found: %w", xpu.ErrUnavailable)}
	up := &fakeDriver{}
	register(t, "t-down", down)
	register(t, "t-up", up)

	t.Setenv(xpu.EnvBackend, " t-down , cuda,t-up ")
	assert.Equal(t, []string{"t-down", "cuda", "t-up"}, xpu.Chain())
	b, skipped, err := xpu.OpenDefault(context.Background(), nil)
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, "t-up", b.Name)
	require.Len(t, skipped, 2, "one reason per skipped candidate")
	assert.ErrorIs(t, skipped[0], xpu.ErrUnavailable)
	assert.ErrorIs(t, skipped[1], xpu.ErrUnknownBackend, "cuda, of this module, is skipped where it is not linked")
	assert.Equal(t, xpu.Selection{Chain: []string{"t-down", "cuda", "t-up"}, Why: "from XPU_BACKEND", Chosen: "t-up", Skipped: skipped},
		b.Selection)
	assert.Equal(t, `xpu: opened t-up of the chain t-down,cuda,t-up (from XPU_BACKEND); skipped: `+
		`t-down open: libfake.so not found: backend unavailable; `+
		`xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"`,
		b.Selection.String())

	t.Setenv(xpu.EnvBackend, "t-down,rdma")
	_, reasons, err := xpu.OpenDefault(context.Background(), nil)
	var se *xpu.SkipError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []string{"t-down", "rdma"}, se.Chain)
	assert.Len(t, reasons, 2)
	assert.ErrorIs(t, err, xpu.ErrUnavailable, "the reasons are reachable with errors.Is")
	assert.Equal(t, `xpu: no backend of t-down,rdma could be opened (from XPU_BACKEND): t-down open: libfake.so not found: backend unavailable; `+
		`xpu open: unknown backend "rdma": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/rdma"`, err.Error())

	t.Setenv(xpu.EnvBackend, "")
	assert.Equal(t, xpu.DefaultChain, xpu.Chain())
	plan, err := xpu.PlanDefault()
	require.NoError(t, err)
	assert.Equal(t, xpu.Selection{Chain: xpu.DefaultChain, Why: "the default; XPU_BACKEND is unset"}, plan)
	assert.Equal(t, "xpu: the chain cuda,cpu (the default; XPU_BACKEND is unset)", plan.String())
}

// A name in XPU_BACKEND that is no backend at all is an error before any
// candidate is tried: a typo never falls back to the next.
func TestOpenDefaultTypo(t *testing.T) {
	noJob(t)
	down := &fakeDriver{err: xpu.ErrUnavailable}
	register(t, "t-down", down)
	t.Setenv(xpu.EnvBackend, "t-down,cdua,cpu")
	b, skipped, err := xpu.OpenDefault(context.Background(), nil)
	assert.Nil(t, b)
	assert.Nil(t, skipped)
	require.ErrorIs(t, err, xpu.ErrUnknownBackend)
	assert.Equal(t, `xpu open: XPU_BACKEND="t-down,cdua,cpu": unknown backend "cdua" (did you mean cuda?); `+
		`known: cpu, cuda, local, mpi, procs, rdma, t-down, tcp`, err.Error())
	assert.Zero(t, down.tries, "no candidate was tried")
	_, err = xpu.PlanDefault()
	assert.ErrorIs(t, err, xpu.ErrUnknownBackend)
	assert.Equal(t, []string{"t-down", "cdua", "cpu"}, xpu.Chain(), "Chain shows what XPU_BACKEND holds")
}

// Open takes a chain where it takes a name, and says what it chose.
func TestOpenChain(t *testing.T) {
	ctx := context.Background()
	down := &fakeDriver{err: fmt.Errorf("no device: %w", xpu.ErrUnavailable)}
	up := &fakeDriver{}
	register(t, "t-down", down)
	register(t, "t-up", up)

	b, err := xpu.Open(ctx, "t-down, cuda ,t-up", nil)
	require.NoError(t, err)
	assert.Equal(t, "t-up", b.Name)
	assert.Equal(t, `xpu: opened t-up of the chain t-down,cuda,t-up (named by the caller); skipped: t-down open: no device: backend unavailable; `+
		`xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"`,
		b.Selection.String())
	require.NoError(t, b.Close())

	b, err = xpu.Open(ctx, "t-up", nil)
	require.NoError(t, err)
	assert.Equal(t, "xpu: opened t-up (named by the caller)", b.Selection.String())
	require.NoError(t, b.Close())

	_, err = xpu.Open(ctx, "t-down,cuda", nil)
	var se *xpu.SkipError
	require.ErrorAs(t, err, &se)
	assert.ErrorIs(t, err, xpu.ErrUnavailable)
	assert.Equal(t, `xpu: no backend of t-down,cuda could be opened (named by the caller): t-down open: no device: backend unavailable; `+
		`xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"`, err.Error())

	tries := down.tries
	_, err = xpu.Open(ctx, "t-down,t-upp", nil)
	assert.ErrorIs(t, err, xpu.ErrUnknownBackend)
	assert.Equal(t, `xpu open: unknown backend "t-upp" (did you mean t-up?); known: cpu, cuda, local, mpi, procs, rdma, t-down, t-up, tcp`,
		err.Error())
	assert.Equal(t, tries, down.tries, "a typo is found before any candidate is tried")

	_, err = xpu.Open(ctx, " , ", nil)
	assert.ErrorIs(t, err, xpu.ErrUnknownBackend)
}

// In a rank of a job of several ranks, with XPU_BACKEND unset, OpenDefault
// tries the backends with a communicator the program links — mpi under an
// MPI launcher, then procs — and says why.
func TestOpenDefaultInJob(t *testing.T) {
	ctx := context.Background()
	mpiDown := &fakeDriver{err: xerr.Errorf("mpi", "open", xpu.ErrUnavailable, "built without -tags mpi")}
	procsUp := &fakeDriver{}
	for _, c := range []struct {
		name   string
		env    []string
		linked []string // of mpi and procs
		chain  string   // Selection.String of PlanDefault
		opened string   // Selection.String of what OpenDefault opened
	}{
		{"mpirun", []string{"OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "4"}, []string{"mpi", "procs"},
			"xpu: the chain mpi,procs (rank 1 of 4 (open-mpi) needs a communicator; XPU_BACKEND is unset)",
			"xpu: opened procs of the chain mpi,procs (rank 1 of 4 (open-mpi) needs a communicator; XPU_BACKEND is unset); " +
				"skipped: mpi open: built without -tags mpi: backend unavailable"},
		{"srun", []string{"SLURM_PROCID", "2", "SLURM_NTASKS", "3", "SLURM_STEP_ID", "0"}, []string{"procs"},
			"xpu: the chain procs (rank 2 of 3 (slurm) needs a communicator; XPU_BACKEND is unset)",
			"xpu: opened procs (rank 2 of 3 (slurm) needs a communicator; XPU_BACKEND is unset)"},
		{"xpu run", []string{"XPU_RANK", "0", "XPU_WORLD_SIZE", "2"}, []string{"mpi", "procs"},
			"xpu: the chain procs (rank 0 of 2 (xpu) needs a communicator; XPU_BACKEND is unset)",
			"xpu: opened procs (rank 0 of 2 (xpu) needs a communicator; XPU_BACKEND is unset)"},
		{"a Slurm batch script", []string{"SLURM_PROCID", "0", "SLURM_NTASKS", "3"}, []string{"mpi", "procs"},
			"xpu: the chain cuda,cpu (the default; XPU_BACKEND is unset)",
			`xpu: opened cpu of the chain cuda,cpu (the default; XPU_BACKEND is unset); skipped: ` +
				`xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"`},
		{"a job of one rank", []string{"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "1"}, []string{"mpi", "procs"},
			"xpu: the chain cuda,cpu (the default; XPU_BACKEND is unset)",
			`xpu: opened cpu of the chain cuda,cpu (the default; XPU_BACKEND is unset); skipped: ` +
				`xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"`},
		{"no communicator linked", []string{"PMI_RANK", "1", "PMI_SIZE", "2"}, nil,
			`xpu: the chain cuda,cpu (the default; XPU_BACKEND is unset; rank 1 of 2 (pmi) would need a communicator, ` +
				`but the program links none (import _ "github.com/xpu-go/xpu/backends/procs"))`,
			`xpu: opened cpu of the chain cuda,cpu (the default; XPU_BACKEND is unset; rank 1 of 2 (pmi) would need a communicator, ` +
				`but the program links none (import _ "github.com/xpu-go/xpu/backends/procs")); skipped: ` +
				`xpu open: unknown backend "cuda": not linked into this program; add import _ "github.com/xpu-go/xpu/backends/cuda"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			noJob(t)
			for i := 0; i < len(c.env); i += 2 {
				t.Setenv(c.env[i], c.env[i+1])
			}
			for _, n := range c.linked {
				register(t, n, map[string]xpu.Driver{"mpi": mpiDown, "procs": procsUp}[n])
			}
			plan, err := xpu.PlanDefault()
			require.NoError(t, err)
			assert.Equal(t, c.chain, plan.String())
			assert.Equal(t, plan.Chain, xpu.Chain())
			b, _, err := xpu.OpenDefault(ctx, nil)
			require.NoError(t, err)
			assert.Equal(t, c.opened, b.Selection.String())
			require.NoError(t, b.Close())
		})
	}

	// XPU_BACKEND, when set, is the chain, in a job too.
	noJob(t)
	register(t, "procs", procsUp)
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
	t.Setenv(xpu.EnvBackend, "cpu")
	plan, err := xpu.PlanDefault()
	require.NoError(t, err)
	assert.Equal(t, "xpu: the chain cpu (from XPU_BACKEND)", plan.String())

	// Launcher variables that describe no rank are an error, not "no job".
	t.Setenv(xpu.EnvBackend, "")
	t.Setenv("OMPI_COMM_WORLD_RANK", "one")
	_, _, err = xpu.OpenDefault(ctx, nil)
	assert.ErrorIs(t, err, xpu.ErrInvalidArgument)
	assert.Equal(t, `xpu open: env open-mpi: OMPI_COMM_WORLD_RANK="one" and OMPI_COMM_WORLD_SIZE="4" are not a rank of a job of at least one rank: invalid argument`,
		err.Error())
}

func TestDescribe(t *testing.T) {
	register(t, "t-info", &fakeDriver{err: xpu.ErrUnavailable})
	info, err := xpu.Describe(context.Background(), "t-info")
	require.NoError(t, err)
	assert.Equal(t, "t-info", info.Name)
	assert.False(t, info.Available)
	_, err = xpu.Describe(context.Background(), "t-none")
	assert.ErrorIs(t, err, xpu.ErrUnknownBackend)
	assert.True(t, strings.HasPrefix(err.Error(), `xpu describe: unknown backend "t-none"; known: `), err.Error())
	var found bool
	for _, in := range xpu.DescribeAll(context.Background()) {
		found = found || in.Name == "t-info"
	}
	assert.True(t, found)
}

func TestXerrError(t *testing.T) {
	err := &xerr.Error{Backend: "cuda", Device: 1, Op: "alloc", Err: xpu.ErrUnavailable}
	assert.Equal(t, "cuda:1 alloc: backend unavailable", err.Error())
	assert.ErrorIs(t, err, xpu.ErrUnavailable)
	assert.Nil(t, xerr.Op("x", "y", nil))
	assert.Equal(t, "x y: boom", xerr.Op("x", "y", errors.New("boom")).Error())
	k := xerr.NewKind("sub", xerr.ErrInvalidArgument)
	assert.ErrorIs(t, fmt.Errorf("wrapped: %w", k), xerr.ErrInvalidArgument)
	assert.ErrorIs(t, k, k)
	assert.NotErrorIs(t, k, xerr.ErrClosed)
}

// renamedDriver reads the option "size" as a renamed backend would.
type renamedDriver struct{ size int }

func (d *renamedDriver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
	r := opts.Reader("t-new")
	d.size = r.Int("size", 1, 1, 100)
	if err := r.Err(); err != nil {
		return nil, err
	}
	return &xpu.Backend{}, nil
}

func (d *renamedDriver) Info(ctx context.Context) xpu.Info { return xpu.Info{Available: true} }

// A renamed backend keeps its old name as an alias: Open, Describe, chains
// and scoped options accept it, and what opens is named by the new name.
func TestRegisterAlias(t *testing.T) {
	ctx := context.Background()
	d := &renamedDriver{}
	register(t, "t-new", d)
	xpu.RegisterAlias("t-old", "t-new")
	assert.NotContains(t, xpu.Drivers(), "t-old", "Drivers lists each driver once")

	b, err := xpu.Open(ctx, "t-old", xpu.Options{"t-old.size": "7"})
	require.NoError(t, err)
	assert.Equal(t, "t-new", b.Name, "what opens is named by the driver's name")
	assert.Equal(t, 7, d.size, "options scoped to the alias are the driver's")
	require.NoError(t, b.Close())

	_, err = xpu.Open(ctx, "t-new", xpu.Options{"t-old.size": "7", "t-new.size": "9", "size": "3"})
	require.NoError(t, err)
	assert.Equal(t, 9, d.size, "the name's scope comes first, then the alias's, then the bare key")
	_, err = xpu.Open(ctx, "t-new", xpu.Options{"t-old.sise": "7"})
	assert.ErrorIs(t, err, xpu.ErrUnknownOption, "a typo scoped to the alias is the driver's own")
	assert.Contains(t, fmt.Sprint(err), "did you mean size?")
	_, err = xpu.Open(ctx, "t-new", xpu.Options{"other.sise": "7"})
	assert.NoError(t, err, "another backend's key is left to it")

	info, err := xpu.Describe(ctx, "t-old")
	require.NoError(t, err)
	assert.Equal(t, "t-new", info.Name)
	assert.Equal(t, []string{"t-old"}, info.Aliases)

	t.Setenv(xpu.EnvBackend, "t-old")
	b, _, err = xpu.OpenDefault(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "t-new", b.Name)
	require.NoError(t, b.Close())

	assert.PanicsWithValue(t, "xpu: RegisterAlias t-x of t-none, which is not registered",
		func() { xpu.RegisterAlias("t-x", "t-none") })
	assert.PanicsWithValue(t, "xpu: RegisterAlias called twice for driver t-new",
		func() { xpu.RegisterAlias("t-new", "t-new") })
	assert.PanicsWithValue(t, "xpu: Register of t-old, an alias of t-new",
		func() { xpu.Register("t-old", &fakeDriver{}) })
	assert.Panics(t, func() { xpu.RegisterAlias("t.old", "t-new") }, "an alias is a name like any other")
}
