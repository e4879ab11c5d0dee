package launch

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/xpu-go/xpu/internal/affinity"
)

// Binding ranks to processors (Spec.Bind).
//
// The processors this process may run on are dealt out to the ranks in an
// order that keeps a core's hardware threads, and a package's cores,
// together (processors). With at least as many processors as ranks, each
// rank takes an equal run of them, so that a Go rank keeps the parallelism
// of its share (GOMAXPROCS follows its set); with fewer, rank i takes
// processor i mod their number, as Open MPI's --bind-to core deals ranks to
// cores when allowed to overload them. A rank is bound from its start: the
// thread that starts it is bound to the rank's processors for the moment of
// the fork, and the rank inherits its set.

// cpuPlace is a processor and where it sits: its package and core.
type cpuPlace struct{ pkg, core, id int }

// processors returns the processors the calling thread may run on, in
// byTopology's order, from the topology of /sys. Where it cannot be read, a
// processor sorts as a core of its own (its number). Off Linux it fails
// with an error matching xerr.ErrNotSupported (package affinity).
func processors() ([]int, error) {
	ids, err := affinity.Of(0)
	if err != nil {
		return nil, fmt.Errorf("the processors this process may run on: %w", err)
	}
	cs := make([]cpuPlace, len(ids))
	for i, id := range ids {
		dir := filepath.Join("/sys/devices/system/cpu", "cpu"+strconv.Itoa(id), "topology")
		pkg, ok1 := readInt(filepath.Join(dir, "physical_package_id"))
		core, ok2 := readInt(filepath.Join(dir, "core_id"))
		if !ok1 || !ok2 {
			pkg, core = 0, id
		}
		cs[i] = cpuPlace{pkg, core, id}
	}
	return byTopology(cs), nil
}

// readInt reads a file that holds one integer.
func readInt(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// byTopology orders processors by package, then core, then number, and
// returns their numbers: a core's hardware threads next to each other, a
// package's cores next to each other.
func byTopology(cs []cpuPlace) []int {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b cpuPlace) int {
		return cmp.Or(cmp.Compare(a.pkg, b.pkg), cmp.Compare(a.core, b.core), cmp.Compare(a.id, b.id))
	})
	ids := make([]int, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	return ids
}

// placement returns the processors of each of n ranks, from cpus in the
// order they are to be taken.
func placement(cpus []int, n int) [][]int {
	c := len(cpus)
	out := make([][]int, n)
	for i := range out {
		if n > c {
			out[i] = []int{cpus[i%c]}
			continue
		}
		lo, hi := i*c/n, (i+1)*c/n
		out[i] = append([]int(nil), cpus[lo:hi]...)
	}
	return out
}
