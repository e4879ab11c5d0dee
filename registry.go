package xpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/xpu-go/xpu/xerr"
)

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
	aliases   = map[string]string{} // alias -> the name it stands for
)

// EnvBackend is the environment variable OpenDefault reads: a
// comma-separated, ordered fallback chain of backend names ("cuda,cpu").
// `xpu run` sets it to "procs" in each rank it starts, unless it is set.
const EnvBackend = "XPU_BACKEND"

// DefaultChain is the chain OpenDefault tries when EnvBackend is unset
// and the process is no rank of a job of several ranks (PlanDefault).
var DefaultChain = []string{"cuda", "cpu"}

// Register makes a driver available by name. It panics if d is nil or the
// name is taken, as database/sql does: both are programming errors. So is a
// name that is empty or holds a comma or white space (it would break
// XPU_BACKEND chains), a dot (it would break options scoped "name.key") or
// a slash (it would split the test names of the conformance suite).
func Register(name string, d Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if d == nil {
		panic("xpu: Register driver is nil")
	}
	checkName("Register", name)
	drivers[name] = d
}

// checkName panics, for fn, when name is not a valid driver name or is
// taken already by a driver or an alias. The caller holds driversMu.
func checkName(fn, name string) {
	if name == "" || strings.ContainsAny(name, ", \t\n./") {
		panic("xpu: " + fn + " with an invalid name " + fmt.Sprintf("%q", name))
	}
	if _, dup := drivers[name]; dup {
		panic("xpu: " + fn + " called twice for driver " + name)
	}
	if to, dup := aliases[name]; dup {
		panic("xpu: " + fn + " of " + name + ", an alias of " + to)
	}
}

// RegisterAlias makes alias a second name of the driver registered as
// name, which a backend keeps when it is renamed: Open, Describe, a chain
// of EnvBackend and options scoped "alias.key" accept it as they accept
// name, and the Backend opened is named name. Drivers does not list it;
// Info.Aliases does. It panics, as Register does, when name is not
// registered or alias is invalid or taken.
func RegisterAlias(alias, name string) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, ok := drivers[name]; !ok {
		panic("xpu: RegisterAlias " + alias + " of " + name + ", which is not registered")
	}
	checkName("RegisterAlias", alias)
	aliases[alias] = name
}

// aliasesOf returns the sorted aliases of the driver registered as name.
func aliasesOf(name string) []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	var out []string
	for a, to := range aliases {
		if to == name {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// canonical returns the name an alias stands for, or name itself.
func canonical(name string) string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	if to, ok := aliases[name]; ok {
		return to
	}
	return name
}

// unregister is for tests only (see export_test.go).
func unregister(name string) {
	driversMu.Lock()
	defer driversMu.Unlock()
	delete(drivers, name)
	for a, to := range aliases {
		if to == name || a == name {
			delete(aliases, a)
		}
	}
}

// Drivers returns the sorted names of the registered drivers.
func Drivers() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lookup returns the driver registered under name or an alias of it, or an
// error of op matching ErrUnknownBackend: for a backend of this module
// that the program does not link, it names the import that links it; for
// any other name, the nearest known name and every known one.
func lookup(op, name string) (Driver, error) {
	driversMu.RLock()
	d, ok := drivers[name]
	if to, alias := aliases[name]; alias {
		d, ok = drivers[to]
	}
	driversMu.RUnlock()
	if !ok {
		return nil, xerr.Op("xpu", op, unknown(name))
	}
	return d, nil
}

// Open opens the backend registered under name, or under the name an alias
// stands for, and records in its Selection that the caller named it.
//
// name may also be a chain, names separated by commas ("cuda,cpu"): Open
// then opens the first candidate that opens and records in the Backend's
// Selection why each before it was skipped, or returns a *SkipError when
// none opens. Every name of a chain must be a registered driver, an alias
// of one or a backend of this module; any other is an error matching
// ErrUnknownBackend before any candidate is tried (a typo never falls
// back), and a backend of this module that the program does not link is
// skipped with the import that would link it.
func Open(ctx context.Context, name string, opts Options) (*Backend, error) {
	if !strings.Contains(name, ",") {
		b, err := openName(ctx, name, opts)
		if err != nil {
			return nil, err
		}
		b.Selection = Selection{Chain: []string{name}, Why: whyCaller, Chosen: b.Name}
		return b, nil
	}
	chain := splitChain(name)
	if len(chain) == 0 {
		return nil, xerr.Op("xpu", "open", unknown(name))
	}
	if err := checkChain(chain); err != nil {
		return nil, xerr.Op("xpu", "open", err)
	}
	return openChain(ctx, Selection{Chain: chain, Why: whyCaller}, opts)
}

// openName opens the backend registered under name, or under the name an
// alias stands for.
func openName(ctx context.Context, name string, opts Options) (*Backend, error) {
	d, err := lookup("open", name)
	if err != nil {
		return nil, err
	}
	name = canonical(name)
	b, err := d.Open(ctx, opts)
	if err != nil {
		// A driver's own *xerr.Error names the backend already.
		var xe *xerr.Error
		if errors.As(err, &xe) && xe.Backend == name {
			return nil, err
		}
		return nil, xerr.Op(name, "open", err)
	}
	if b.Name == "" {
		b.Name = name
	}
	return b, nil
}

// SkipError is returned by OpenDefault, and by Open of a chain, when no
// candidate of the chain could be opened. It lists the reason each
// candidate was skipped, each of which names its candidate, on one line
// separated by "; ", and matches each reason under errors.Is
// (ErrUnavailable, typically).
type SkipError struct {
	Chain []string
	// Why says where the chain comes from, as Selection.Why does; "" when
	// unknown.
	Why     string
	Reasons []error
}

func (e *SkipError) Error() string {
	var b strings.Builder
	b.WriteString("xpu: no backend of ")
	b.WriteString(strings.Join(e.Chain, ","))
	b.WriteString(" could be opened")
	writeWhy(&b, e.Why, ": ", e.Reasons)
	return b.String()
}

// Unwrap returns the reasons.
func (e *SkipError) Unwrap() []error { return e.Reasons }

// Chain returns the fallback chain OpenDefault tries, PlanDefault's; when
// PlanDefault fails, the names EnvBackend holds, else DefaultChain.
func Chain() []string {
	if s, err := PlanDefault(); err == nil {
		return s.Chain
	}
	if c := splitChain(os.Getenv(EnvBackend)); len(c) > 0 {
		return c
	}
	return slices.Clone(DefaultChain)
}

// OpenDefault opens the first backend of the chain PlanDefault returns
// that opens, and returns the reasons the earlier candidates were skipped
// (nil when the first opened); the Backend's Selection says which chain it
// was, why, and which backend was chosen. When none opens it returns a
// *SkipError; when PlanDefault fails (an unknown name in EnvBackend), its
// error, before any backend is tried.
func OpenDefault(ctx context.Context, opts Options) (*Backend, []error, error) {
	s, err := PlanDefault()
	if err != nil {
		return nil, nil, xerr.Op("xpu", "open", err)
	}
	b, err := openChain(ctx, s, opts)
	if err != nil {
		var se *SkipError
		if errors.As(err, &se) {
			return nil, se.Reasons, err
		}
		return nil, nil, err
	}
	return b, b.Selection.Skipped, nil
}

// Describe returns the Info of the backend registered under name, or under
// the name an alias stands for.
func Describe(ctx context.Context, name string) (Info, error) {
	d, err := lookup("describe", name)
	if err != nil {
		return Info{}, err
	}
	name = canonical(name)
	info := d.Info(ctx)
	if info.Name == "" {
		info.Name = name
	}
	if info.Aliases == nil {
		info.Aliases = aliasesOf(name)
	}
	return info, nil
}

// DescribeAll returns the Info of every registered backend, sorted by name.
func DescribeAll(ctx context.Context) []Info {
	var out []Info
	for _, n := range Drivers() {
		if info, err := Describe(ctx, n); err == nil {
			out = append(out, info)
		}
	}
	return out
}
