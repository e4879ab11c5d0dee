package xpu

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/nearest"
)

// module is the import path of this module, whose backends live below it.
const module = "github.com/xpu-go/xpu"

// inTree maps the name of each backend of this module, and each former
// name that stays an alias of one, to the package a program imports (for
// its side effect) to link the backend in. An error for a name a program
// does not link says which import links it.
var inTree = map[string]string{
	"cpu":   module + "/backends/cpu",
	"cuda":  module + "/backends/cuda",
	"local": module + "/backends/local",
	"mpi":   module + "/backends/mpi",
	"procs": module + "/backends/procs",
	"rdma":  module + "/backends/rdma",
	"tcp":   module + "/backends/procs", // the former name of procs
}

// Why a chain is what it is, as Selection.Why says it.
const (
	whyCaller  = "named by the caller"
	whyEnv     = "from " + EnvBackend
	whyDefault = "the default; " + EnvBackend + " is unset"
)

// Selection says how a backend was chosen: the chain of candidates, why
// the chain is what it is, the candidate opened and why each candidate
// before it was skipped. Open and OpenDefault set it on the Backend they
// return; PlanDefault returns the chain and its reason alone.
type Selection struct {
	// Chain lists the candidates in the order they are tried.
	Chain []string
	// Why says where Chain comes from: "named by the caller" (Open), "from
	// XPU_BACKEND", "the default; XPU_BACKEND is unset", or, for a rank of
	// a job of several ranks, the rank and the communicator it needs
	// ("rank 1 of 4 (open-mpi) needs a communicator; XPU_BACKEND is
	// unset").
	Why string
	// Chosen is the name of the backend opened, "" when none was.
	Chosen string
	// Skipped holds, in chain order, why each candidate before Chosen was
	// skipped; each reason names its candidate.
	Skipped []error
}

// String describes s on one line, for a program to print or log:
//
//	xpu: opened cpu of the chain cuda,cpu (from XPU_BACKEND); skipped: cuda open: no CUDA device: backend unavailable
func (s Selection) String() string {
	if s.Chosen == "" && len(s.Chain) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("xpu: ")
	if s.Chosen != "" {
		b.WriteString("opened " + s.Chosen)
		if len(s.Chain) > 1 {
			b.WriteString(" of the chain " + strings.Join(s.Chain, ","))
		}
	} else {
		b.WriteString("the chain " + strings.Join(s.Chain, ","))
	}
	writeWhy(&b, s.Why, "; skipped: ", s.Skipped)
	return b.String()
}

// writeWhy writes " (why)" when there is a why, then the reasons, the
// first after lead and the others after "; ".
func writeWhy(b *strings.Builder, why, lead string, reasons []error) {
	if why != "" {
		b.WriteString(" (" + why + ")")
	}
	for i, r := range reasons {
		if i == 0 {
			b.WriteString(lead)
		} else {
			b.WriteString("; ")
		}
		b.WriteString(r.Error())
	}
}

// jobBackends are the backends of this module with a communicator across
// processes, in the order OpenDefault prefers them for a rank of a job:
// mpi under a launcher of MPI's (not under `xpu run`, whose ranks are
// each a job of one rank to MPI), then procs, which joins a job under
// every launcher. rdma is not among them: ranks that disagreed on whether
// their node has an RDMA device would join different backends and wait for
// each other until the join timeout; XPU_BACKEND names it.
func jobBackends(p jobenv.Place) []string {
	if p.Launcher == "xpu" {
		return []string{"procs"}
	}
	return []string{"mpi", "procs"}
}

// PlanDefault returns the chain OpenDefault tries and why, in a Selection
// with no backend chosen yet:
//
//   - the names of XPU_BACKEND when it is set, each of which must be a
//     registered driver, an alias of one or a backend of this module (the
//     latter skipped when the program does not link it): any other name is
//     an error matching ErrUnknownBackend, so that a typo never falls back;
//   - else, in a rank of a job of several ranks (the variables of `xpu
//     run`, of Open MPI's mpirun, of PMIx or PMI launchers, or of a Slurm
//     job step), the backends with a communicator across processes that
//     the program links: mpi (under an MPI launcher) then procs;
//   - else DefaultChain. A rank of a job that links no such backend gets
//     it too, and Why says which import would give it a communicator.
//
// Launcher variables that describe no rank of a job (a rank that is not
// a number) are an error matching ErrInvalidArgument.
func PlanDefault() (Selection, error) {
	if v := strings.TrimSpace(os.Getenv(EnvBackend)); v != "" {
		chain := splitChain(v)
		if err := checkChain(chain); err != nil {
			return Selection{}, fmt.Errorf("%s=%q: %w", EnvBackend, v, err)
		}
		return Selection{Chain: chain, Why: whyEnv}, nil
	}
	p, ok, err := jobenv.MultiRank(jobenv.OS)
	if err != nil {
		return Selection{}, err
	}
	if !ok {
		return Selection{Chain: slices.Clone(DefaultChain), Why: whyDefault}, nil
	}
	var chain []string
	for _, n := range jobBackends(p) {
		if linked(n) {
			chain = append(chain, n)
		}
	}
	if len(chain) == 0 {
		return Selection{Chain: slices.Clone(DefaultChain), Why: fmt.Sprintf(
			"%s; %s would need a communicator, but the program links none (import _ %q)", whyDefault, p, inTree["procs"])}, nil
	}
	return Selection{Chain: chain, Why: p.String() + " needs a communicator; " + EnvBackend + " is unset"}, nil
}

// splitChain returns the names of a comma-separated chain, trimmed, empty
// ones left out.
func splitChain(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// checkChain returns the error of the first name of chain that is neither
// linked nor a backend of this module.
func checkChain(chain []string) error {
	for _, n := range chain {
		if _, tree := inTree[n]; !tree && !linked(n) {
			return unknown(n)
		}
	}
	return nil
}

// linked reports whether name is a registered driver or an alias of one.
func linked(name string) bool {
	driversMu.RLock()
	defer driversMu.RUnlock()
	_, ok := drivers[name]
	_, alias := aliases[name]
	return ok || alias
}

// knownNames returns, sorted, every name Open could accept in a program
// that linked it: the registered drivers, their aliases and the backends
// of this module.
func knownNames() []string {
	driversMu.RLock()
	names := make([]string, 0, len(drivers)+len(aliases)+len(inTree))
	for n := range drivers {
		names = append(names, n)
	}
	for a := range aliases {
		names = append(names, a)
	}
	driversMu.RUnlock()
	for n := range inTree {
		names = append(names, n)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// unknown is the error of a name no driver is registered under: for a
// backend of this module, the import that links it; for any other name,
// the nearest known name and every known one.
func unknown(name string) error {
	if pkg, ok := inTree[name]; ok {
		return fmt.Errorf("%w %q: not linked into this program; add import _ %q", ErrUnknownBackend, name, pkg)
	}
	known := knownNames()
	// The names nearest, within two edits (a swap of two letters is one)
	// and no more than half the name's length, all of them when several
	// are as near.
	var near []string
	limit := min(2, len(name)/2)
	best := limit + 1
	for _, k := range known {
		if d := nearest.Edits(name, k); d < best {
			best, near = d, []string{k}
		} else if d == best && d <= limit {
			near = append(near, k)
		}
	}
	hint := ""
	if len(near) > 0 {
		hint = " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	return fmt.Errorf("%w %q%s; known: %s", ErrUnknownBackend, name, hint, strings.Join(known, ", "))
}

// openChain opens the first candidate of s.Chain that opens, and records
// in s the one chosen and the reasons the others were skipped. When none
// opens it returns a *SkipError.
func openChain(ctx context.Context, s Selection, opts Options) (*Backend, error) {
	for _, name := range s.Chain {
		b, err := openName(ctx, name, opts)
		if err == nil {
			s.Chosen = b.Name
			b.Selection = s
			return b, nil
		}
		s.Skipped = append(s.Skipped, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, &SkipError{Chain: s.Chain[:len(s.Skipped)], Why: s.Why, Reasons: s.Skipped}
}
