package p2p

// The eager-message options every communicator that sends small messages
// ahead of their receive reads, with one meaning: eager_limit is the largest
// message sent eagerly, a size from 0 (none: every nonempty message goes by
// rendezvous) up to the backend's bound, and eager_budget the eager bytes a
// rank holds for one peer, a size of at least one byte.

import "github.com/xpu-go/xpu"

// The option keys.
const (
	OptLimit  = "eager_limit"
	OptBudget = "eager_budget"
)

// Bounds are a backend's defaults and largest values of the two options.
type Bounds struct {
	DefaultLimit, MaxLimit   int64
	DefaultBudget, MaxBudget int64
}

// Read reads both options with r and returns them as the backends' Go APIs
// take them: a limit of -1 for "no eager messages", else the size.
func Read(r *xpu.OptionReader, b Bounds) (limit, budget int) {
	l := r.Bytes(OptLimit, b.DefaultLimit, 0, b.MaxLimit)
	budget = int(r.Bytes(OptBudget, b.DefaultBudget, 1, b.MaxBudget))
	if l == 0 {
		return -1, budget
	}
	return int(l), budget
}
