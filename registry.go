package xpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/xerr"
)

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
	aliases   = map[string]string{} // alias -> the name it stands for
)

// EnvBackend is the environment variable OpenDefault reads: a
// comma-separated, ordered fallback chain of backend names ("cuda,cpu").
const EnvBackend = jobenv.Backend

// DefaultChain is the chain OpenDefault tries when EnvBackend is unset.
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
// error of op matching ErrUnknownBackend that lists the registered names.
func lookup(op, name string) (Driver, error) {
	driversMu.RLock()
	d, ok := drivers[name]
	if to, alias := aliases[name]; alias {
		d, ok = drivers[to]
	}
	driversMu.RUnlock()
	if !ok {
		avail := strings.Join(Drivers(), ", ")
		if avail == "" {
			avail = "none"
		}
		return nil, xerr.Op("xpu", op, fmt.Errorf("%w %q (forgotten import?); available: %s", ErrUnknownBackend, name, avail))
	}
	return d, nil
}

// Open opens the backend registered under name, or under the name an alias
// stands for.
func Open(ctx context.Context, name string, opts Options) (*Backend, error) {
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

// SkipError is returned by OpenDefault when no candidate of the chain could
// be opened. It lists the reason each candidate was skipped, each of which
// names its candidate, on one line separated by "; ", and matches each
// reason under errors.Is (ErrUnavailable, typically).
type SkipError struct {
	Chain   []string
	Reasons []error
}

func (e *SkipError) Error() string {
	var b strings.Builder
	b.WriteString("xpu: no backend of ")
	b.WriteString(strings.Join(e.Chain, ","))
	b.WriteString(" could be opened")
	for i, r := range e.Reasons {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(r.Error())
	}
	return b.String()
}

// Unwrap returns the reasons.
func (e *SkipError) Unwrap() []error { return e.Reasons }

// Chain returns the fallback chain OpenDefault would try: EnvBackend's
// names when set, else DefaultChain.
func Chain() []string {
	if v := strings.TrimSpace(os.Getenv(EnvBackend)); v != "" {
		var out []string
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				out = append(out, n)
			}
		}
		return out
	}
	return append([]string(nil), DefaultChain...)
}

// OpenDefault opens the first backend of Chain that opens, and returns the
// reasons the earlier candidates were skipped (nil when the first opened).
// When none opens it returns a *SkipError.
func OpenDefault(ctx context.Context, opts Options) (*Backend, []error, error) {
	chain := Chain()
	var reasons []error
	for _, name := range chain {
		b, err := Open(ctx, name, opts)
		if err == nil {
			return b, reasons, nil
		}
		reasons = append(reasons, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, reasons, &SkipError{Chain: chain[:len(reasons)], Reasons: reasons}
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
