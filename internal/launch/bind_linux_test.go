package launch

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/affinity"
)

// parseCPUList parses a list such as "0-2,5" into its processors.
func parseCPUList(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		require.NoError(t, err, s)
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
			require.NoError(t, err, s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}

// threadSets returns the processor set of each thread of this process.
func threadSets() (map[int][]int, error) {
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	out := map[int][]int{}
	for _, d := range tids {
		tid, err := strconv.Atoi(d.Name())
		if err != nil {
			return nil, err
		}
		if set, err := affinity.Of(tid); err == nil { // a thread may end meanwhile
			out[tid] = set
		}
	}
	return out, nil
}

// TestRunBind runs jobs bound to processors, with fewer ranks than
// processors where there are several and with more, and checks each rank's
// set as the rank itself reads it, its GOMAXPROCS, what the result says,
// and that no thread of the launcher keeps a rank's set.
func TestRunBind(t *testing.T) {
	all, err := processors()
	require.NoError(t, err)
	mine, err := affinity.Of(0)
	require.NoError(t, err)
	counts := []int{1, len(all) + 1}
	if len(all) > 1 {
		counts = append(counts, 2)
	}
	for _, n := range counts {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ctx, cancel := context.WithCancel(guard(t))
			defer cancel()
			var sets map[int][]int
			var setsErr error
			// Once every rank runs, the threads that started them are
			// still there, locked to their goroutines until the ranks
			// are reaped.
			stdout := whenReady(n, func() {
				sets, setsErr = threadSets()
				cancel()
			})
			spec := roleSpec(n, "cpus")
			spec.Bind, spec.Stdout = true, stdout
			res, err := Run(ctx, spec)
			require.ErrorIs(t, err, context.Canceled)
			require.NoError(t, setsErr)
			for tid, set := range sets {
				assert.Equal(t, mine, set, "thread %d of the launcher keeps another set", tid)
			}
			want := placement(all, n)
			for i := 0; i < n; i++ {
				assert.Equal(t, want[i], res.Ranks[i].CPUs, "rank %d's CPUs", i)
				var list string
				var gmp int
				line := lineOf(t, stdout.String(), "["+strconv.Itoa(i)+"] cpus ")
				_, err := fmt.Sscanf(line, "%s gomaxprocs %d", &list, &gmp)
				require.NoError(t, err, line)
				sorted := slices.Sorted(slices.Values(want[i]))
				assert.Equal(t, sorted, parseCPUList(t, list), "rank %d's set, as it reads it", i)
				assert.Equal(t, len(want[i]), gmp, "rank %d's GOMAXPROCS", i)
			}
		})
	}
}

// lineOf returns the rest of the output line that begins with prefix.
func lineOf(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest
		}
	}
	t.Fatalf("no line beginning %q in %q", prefix, out)
	return ""
}

// An unbound job's ranks run where the launcher may, and the result
// names no processors.
func TestRunUnbound(t *testing.T) {
	res, err := Run(guard(t), roleSpec(2, "print"))
	require.NoError(t, err)
	for _, st := range res.Ranks {
		assert.Nil(t, st.CPUs)
	}
}

func TestRunMPIRefusesBind(t *testing.T) {
	spec := roleSpec(2, "print")
	spec.Bind = true
	err := RunMPI(guard(t), spec)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, "launch: Bind does not apply to RunMPI: mpirun binds the ranks (--bind-to): invalid argument", err.Error())
}
