package procs

import "time"

// SetJoinInterval sets how often a rank still joining logs its progress,
// for a test, and returns a function that restores the default.
func SetJoinInterval(d time.Duration) (restore func()) {
	old := joinInterval.Swap(int64(d))
	return func() { joinInterval.Store(old) }
}
