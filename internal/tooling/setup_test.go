package tooling_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setupScript is the script the make targets run to install what they
// need, by profile.
const setupScript = "scripts/setup.sh"

// demoForbidden are the packages of the RDMA guest and of the GPU kernels'
// compiler, which make demo does not run: a package whose name has one of
// these in it must not be in the demo's profile.
var demoForbidden = []string{"qemu", "clang", "rdma", "ibverbs", "perftest", "busybox", "cpio", "kmod", "xz-utils"}

// setupProfile returns the packages scripts/setup.sh installs for profile,
// as the script itself resolves them (--list).
func setupProfile(t *testing.T, root, profile string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, setupScript), "--list", profile)
	out, err := cmd.Output()
	require.NoError(t, err, "%s --list %s", setupScript, profile)
	pkgs := strings.Fields(string(out))
	require.NotEmpty(t, pkgs, "%s --list %s lists no package", setupScript, profile)
	return pkgs
}

// TestSetupProfiles keeps setup by need: every package a profile of
// scripts/setup.sh installs is on a line of its own with a comment that
// says what needs it, make demo's profile holds none of the RDMA guest's
// or the GPU kernels' tools, and make test's holds them (its RDMA guest
// and PTX tests run, rather than skip).
func TestSetupProfiles(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skipf("no bash to run %s --list: %v", setupScript, err)
	}
	root := filepath.Join("..", "..")
	text, err := os.ReadFile(filepath.Join(root, setupScript))
	require.NoError(t, err)
	// A package line of a group: the name, then "# what needs it".
	reason := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+([a-z0-9][a-z0-9.+-]*)[ \t]*(?:#[ \t]*(.*))?$`).FindAllStringSubmatch(string(text), -1) {
		reason[m[1]] = strings.TrimSpace(m[2])
	}
	profiles := map[string][]string{}
	for _, p := range []string{"demo", "bench", "test", "rdma", "chaos"} {
		profiles[p] = setupProfile(t, root, p)
		for _, pkg := range profiles[p] {
			why, ok := reason[pkg]
			if assert.True(t, ok, "profile %s installs %s, which has no line of its own in %s", p, pkg, setupScript) {
				assert.NotEmpty(t, why, "%s: package %s (profile %s) has no comment saying what needs it", setupScript, pkg, p)
			}
		}
	}
	for _, pkg := range profiles["demo"] {
		for _, f := range demoForbidden {
			assert.NotContains(t, pkg, f, "make demo installs %s, which only the RDMA guest's or the GPU kernels' tests use", pkg)
		}
	}
	for _, want := range []string{"gcc", "qemu-system-x86", "busybox-static", "libibverbs-dev", "clang-14", "iptables"} {
		assert.Contains(t, profiles["test"], want, "make test's profile lacks %s: a test it runs would skip", want)
	}
	for _, p := range []string{"bench", "test", "rdma", "chaos"} {
		assert.Subset(t, profiles[p], profiles["demo"], "profile %s lacks what builds xpu and the C references", p)
	}
}

// An unknown profile is an error, not an empty installation.
func TestSetupUnknownProfile(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skipf("no bash: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", setupScript), "--list", "dmeo").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "output: %s", out)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Contains(t, string(out), "setup: unknown profile dmeo")
}
