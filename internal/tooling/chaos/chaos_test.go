//go:build linux

package chaos_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/internal/tooling/chaos"
)

// TestMain plays a launcher or a rank when Run started this binary as one.
func TestMain(m *testing.M) {
	if chaos.IsRole() {
		os.Exit(chaos.RunRole())
	}
	goleak.VerifyTestMain(m)
}

// TestChaosQuick is the short chaos run: one repetition of each kind of
// fault (make chaos runs a hundred), each striking a job of 4 ranks in the
// middle of its allreduces. None may hang, compute a wrong result, fail
// with an error other than a lost peer, leave a process behind once the
// launcher has ended, or leave a file.
func TestChaosQuick(t *testing.T) {
	var log strings.Builder
	rep, err := chaos.Run(chaos.Config{N: len(chaos.Kinds), Seed: 1, AfterReady: true, Window: 300 * time.Millisecond,
		Count: 1 << 15, Budget: time.Minute, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repetitions:\n%s", log.String())
	t.Logf("outcomes:\n%s", rep.Table())
	if !rep.Clean() {
		t.Errorf("the chaos run found trouble:\n%s", rep.Table())
	}
}
