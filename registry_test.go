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
	"github.com/xpu-go/xpu/xerr"
)

// fakeDriver opens when err is nil and counts its opens and closes.
type fakeDriver struct {
	name   string
	err    error
	opens  int
	closes int
}

func (d *fakeDriver) Open(ctx context.Context, opts xpu.Options) (*xpu.Backend, error) {
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

func TestOpenUnknown(t *testing.T) {
	register(t, "t-known", &fakeDriver{})
	_, err := xpu.Open(context.Background(), "t-nope", nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, xpu.ErrUnknownBackend)
	assert.ErrorIs(t, err, xpu.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `"t-nope" (forgotten import?)`)
	assert.Contains(t, err.Error(), "t-known", "the error lists what is available")
	assert.Equal(t, `xpu open: unknown backend "t-nope" (forgotten import?); available: `+strings.Join(xpu.Drivers(), ", "),
		err.Error())
	var xe *xerr.Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, "xpu", xe.Backend)
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

func TestOpenDefaultChain(t *testing.T) {
	down := &fakeDriver{err: fmt.Errorf("libfake.so not found: %w", xpu.ErrUnavailable)}
	up := &fakeDriver{}
	register(t, "t-down", down)
	register(t, "t-up", up)

	t.Setenv(xpu.EnvBackend, " t-down , t-missing,t-up ")
	assert.Equal(t, []string{"t-down", "t-missing", "t-up"}, xpu.Chain())
	b, skipped, err := xpu.OpenDefault(context.Background(), nil)
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, "t-up", b.Name)
	require.Len(t, skipped, 2, "one reason per skipped candidate")
	assert.ErrorIs(t, skipped[0], xpu.ErrUnavailable)
	assert.Contains(t, skipped[0].Error(), "libfake.so")
	assert.ErrorIs(t, skipped[1], xpu.ErrUnknownBackend)

	t.Setenv(xpu.EnvBackend, "t-down,t-missing")
	_, _, err = xpu.OpenDefault(context.Background(), nil)
	var se *xpu.SkipError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []string{"t-down", "t-missing"}, se.Chain)
	assert.ErrorIs(t, err, xpu.ErrUnavailable, "the reasons are reachable with errors.Is")
	msg := err.Error()
	assert.True(t, strings.Contains(msg, "t-down ") && strings.Contains(msg, `"t-missing"`), msg)
	assert.Equal(t, `xpu: no backend of t-down,t-missing could be opened: t-down open: libfake.so not found: backend unavailable; `+
		`xpu open: unknown backend "t-missing" (forgotten import?); available: `+strings.Join(xpu.Drivers(), ", "), msg)

	t.Setenv(xpu.EnvBackend, "")
	assert.Equal(t, xpu.DefaultChain, xpu.Chain())
}

func TestDescribe(t *testing.T) {
	register(t, "t-info", &fakeDriver{err: xpu.ErrUnavailable})
	info, err := xpu.Describe(context.Background(), "t-info")
	require.NoError(t, err)
	assert.Equal(t, "t-info", info.Name)
	assert.False(t, info.Available)
	_, err = xpu.Describe(context.Background(), "t-none")
	assert.ErrorIs(t, err, xpu.ErrUnknownBackend)
	assert.True(t, strings.HasPrefix(err.Error(), `xpu describe: unknown backend "t-none" (forgotten import?); available: `), err.Error())
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
