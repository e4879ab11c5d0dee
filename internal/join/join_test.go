package join_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/internal/tooling/jointest"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
	"github.com/xpu-go/xpu/xerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFormatRanks(t *testing.T) {
	for _, tc := range []struct {
		ranks []int
		size  int
		want  string
	}{
		{[]int{2}, 3, "rank 2 of 3"},
		{[]int{2, 5}, 8, "ranks 2, 5 of 8"},
		{[]int{2, 3}, 8, "ranks 2, 3 of 8"},
		{[]int{1, 2, 3, 4, 5, 6, 7}, 8, "ranks 1-7 of 8"},
		{[]int{0, 2, 3, 4, 9}, 10, "ranks 0, 2-4, 9 of 10"},
		{[]int{1, 3, 5, 7, 9, 11, 13, 15, 17, 19}, 128, "ranks 1, 3, 5, 7, 9, 11, 13, 15, … (10 ranks) of 128"},
	} {
		assert.Equal(t, tc.want, join.FormatRanks(tc.ranks, tc.size), "%v", tc.ranks)
	}
}

func TestRoster(t *testing.T) {
	r := join.NewRoster(4, 0)
	assert.Equal(t, []int{1, 2, 3}, r.Missing())
	r.Arrive(2)
	r.Arrive(2)
	r.Arrive(-1)
	r.Arrive(4)
	assert.Equal(t, []int{1, 3}, r.Missing())
	r.Arrive(1)
	r.Arrive(3)
	assert.Nil(t, r.Missing())

	a := join.Awaiting(5, 3, 3, 9)
	assert.Equal(t, []int{3}, a.Missing())
	a.Arrive(3)
	assert.Nil(t, a.Missing())
}

func TestTimeoutFromEnv(t *testing.T) {
	d, err := join.TimeoutFromEnv(jobenv.Map(nil))
	require.NoError(t, err)
	assert.Zero(t, d)
	d, err = join.TimeoutFromEnv(jobenv.Map(map[string]string{join.EnvTimeout: " 90s "}))
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, d)
	for _, bad := range []string{"soon", "0", "0s", "-1s", "10"} {
		_, err := join.TimeoutFromEnv(jobenv.Map(map[string]string{join.EnvTimeout: bad}))
		require.ErrorIs(t, err, xerr.ErrInvalidArgument, bad)
		assert.Contains(t, err.Error(), join.EnvTimeout+`="`+bad+`"`)
	}
	assert.Equal(t, "XPU_JOIN_TIMEOUT", join.EnvTimeout)
	assert.Equal(t, "join_timeout", join.OptTimeout)
}

// TestTimeoutNamesTheMissing checks the error of a join that the deadline
// ends, in each phase: it matches ErrTimeout and context.DeadlineExceeded,
// and names what was missing on one line.
func TestTimeoutNamesTheMissing(t *testing.T) {
	refused := &opError{"connect: connection refused", syscall.ECONNREFUSED}
	auth := errors.New("the peer's proof does not match this job's secret: authentication failed")
	for _, tc := range []struct {
		name  string
		setup func(w *join.Wait)
		want  string
		match error
	}{
		{"no master", func(w *join.Wait) { w.Reaching(); w.NoAnswer(refused) },
			"no rank 0 listening at 10.0.0.1:29500 after 50ms (last attempt: connect: connection refused): join timed out",
			syscall.ECONNREFUSED},
		{"foreign master", func(w *join.Wait) { w.Reaching(); w.Foreign(auth) },
			"no rank 0 of this job at 10.0.0.1:29500 after 50ms: the process listening there belongs to another job", auth},
		{"missing ranks", func(w *join.Wait) {
			w.Await(join.Step{Ranks: join.NewRoster(8, 0, 1, 3, 4, 6, 7), Waiting: "to join", Failed: "never joined at 10.0.0.1:29500"})
		}, "ranks 2, 5 of 8 never joined at 10.0.0.1:29500 after 50ms: join timed out", nil},
		{"second step", func(w *join.Wait) {
			w.Await(join.Step{Ranks: join.Awaiting(8), Waiting: "to join", Failed: "never joined"},
				join.Step{Ranks: join.Awaiting(8, 1), Waiting: "to connect", Failed: "never connected with rank 0"})
		}, "rank 1 of 8 never connected with rank 0 after 50ms: join timed out", nil},
		{"nothing said", func(*join.Wait) {}, "the job did not form after 50ms: join timed out", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, ctx := join.Start(context.Background(), join.Params{Backend: "tcp", Rank: 0, Size: 8,
				Master: "10.0.0.1:29500", Timeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			tc.setup(w)
			testwait.Closed(t, ctx.Done(), "the join's context, after its timeout of 50ms")
			require.True(t, w.TimedOut())
			err := w.End(ctx.Err())
			require.ErrorIs(t, err, join.ErrTimeout)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			if tc.match != nil {
				require.ErrorIs(t, err, tc.match, "the last attempt's error is kept")
			}
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
			assert.Equal(t, err, w.End(ctx.Err()), "End again")
		})
	}
}

type opError struct {
	msg string
	err error
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.err }

// TestCallerContextWins checks that the caller's context ending first
// gives its own error, with what the rank waited for, and not ErrTimeout.
func TestCallerContextWins(t *testing.T) {
	for _, end := range []string{"cancel", "deadline"} {
		t.Run(end, func(t *testing.T) {
			parent, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			if end == "cancel" {
				cancel()
			}
			w, ctx := join.Start(parent, join.Params{Backend: "tcp", Rank: 1, Size: 2, Master: "h:1", Timeout: time.Hour})
			w.Reaching()
			testwait.Closed(t, ctx.Done(), "the join's context, after its parent's end")
			err := w.End(fmt.Errorf("store: %w", ctx.Err()))
			require.ErrorIs(t, err, parent.Err())
			require.NotErrorIs(t, err, join.ErrTimeout)
			assert.False(t, w.TimedOut())
			assert.Contains(t, err.Error(), "waiting for rank 0 to listen at h:1 for ")
		})
	}
	// Another error is the caller's as it is.
	w, _ := join.Start(context.Background(), join.Params{Backend: "tcp", Rank: 0, Size: 2, Master: "h:1"})
	boom := errors.New("boom")
	require.Equal(t, boom, w.End(boom))
	// No bound but the caller's.
	w, ctx := join.Start(context.Background(), join.Params{Backend: "tcp", Size: 2, Timeout: -1})
	_, ok := ctx.Deadline()
	assert.False(t, ok)
	require.NoError(t, w.End(nil))
}

// TestProgressLines checks that a rank still waiting logs what it waits
// for every interval, and that it joined when it does.
func TestProgressLines(t *testing.T) {
	var buf jointest.Log
	w, _ := join.Start(context.Background(), join.Params{Backend: "tcp", Rank: 0, Size: 8, Master: "10.0.0.1:29500",
		Timeout: time.Minute, Logger: buf.Logger(), Interval: 10 * time.Millisecond})
	roster := join.NewRoster(8, 0, 1, 3, 4, 6, 7)
	w.Await(join.Step{Ranks: roster, Waiting: "to join at 10.0.0.1:29500", Failed: "never joined"})
	require.Eventually(t, func() bool { return strings.Count(buf.String(), "\n") >= 2 }, 5*time.Second, 5*time.Millisecond)
	roster.Arrive(2)
	roster.Arrive(5)
	require.NoError(t, w.End(nil))
	out := buf.String()
	assert.Contains(t, out, `msg="tcp rank 0 of 8: waiting for ranks 2, 5 of 8 to join at 10.0.0.1:29500"`)
	assert.Contains(t, out, "level=INFO")
	assert.Contains(t, out, "master=10.0.0.1:29500")
	assert.Contains(t, out, "timeout=1m0s")
	assert.Contains(t, out, "missing=2")
	assert.Contains(t, out, `msg="tcp rank 0 of 8: joined the job after `)

	// A join that ends within the interval says nothing.
	buf = jointest.Log{}
	w, _ = join.Start(context.Background(), join.Params{Backend: "tcp", Size: 2, Logger: buf.Logger(), Interval: time.Hour})
	require.NoError(t, w.End(nil))
	assert.Empty(t, buf.String())

	// Reaching rank 0: the last attempt is named; a foreign master says so.
	buf = jointest.Log{}
	w, _ = join.Start(context.Background(), join.Params{Backend: "tcp", Rank: 1, Size: 2, Master: "h:7",
		Logger: buf.Logger(), Interval: 10 * time.Millisecond})
	w.Reaching()
	w.Foreign(errors.New("authentication failed"))
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "not this job's rank 0") }, 5*time.Second, 5*time.Millisecond)
	w.NoAnswer(errors.New("connection refused"))
	require.Eventually(t, func() bool {
		return strings.Contains(buf.String(), "waiting for rank 0 to listen at h:7 (last attempt: connection refused)")
	},
		5*time.Second, 5*time.Millisecond)
	require.NoError(t, w.End(nil))
}
