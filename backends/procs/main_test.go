package procs_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, or — when the multi-process tests start this
// binary as a rank (envRole set) — that rank's part, and exits.
func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runRole(role))
	}
	goleak.VerifyTestMain(m)
}
