package tooling_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGoDocLeadsWithEntryPoints: `go doc` of the packages a user starts
// from opens with what the user calls. go doc prints a package's
// documentation, then its declarations in an order of its own (constants,
// variables, functions, types), which no package can change: so the
// opening of the documentation, before its first heading, must name the
// entry points and show them called; and the declarations' lines must name
// no internal package (an alias such as `const EnvBackend = jobenv.Backend`
// tells a user nothing), but for an error, which must be the engine's own
// value, and hide no code behind `= func() …`.
func TestGoDocLeadsWithEntryPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc; not with -short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	var internal []string
	dirs, err := os.ReadDir(filepath.Join(root, "internal"))
	require.NoError(t, err)
	for _, d := range dirs {
		if d.IsDir() && d.Name() != "tooling" {
			internal = append(internal, regexp.QuoteMeta(d.Name()))
		}
	}
	require.Contains(t, internal, "jobenv", "the walk of internal/ found no package")
	internalRef := regexp.MustCompile(`\b(` + strings.Join(internal, "|") + `)\.[A-Z]`)

	for _, p := range []struct {
		pkg     string
		names   []string // named in the opening
		example string   // called in the opening's example
	}{
		{"github.com/xpu-go/xpu", []string{"Open", "OpenDefault", "XPU_BACKEND", "Backend"}, "xpu.Open("},
		{"github.com/xpu-go/xpu/comm", []string{"Comm", "Backend.Comm", "Backend.Group"}, "comm.Allreduce("},
		{"github.com/xpu-go/xpu/backends/procs", []string{"FromEnv"}, "procs.FromEnv("},
	} {
		var out, errOut bytes.Buffer
		err := guideRun(root, guideEnv(), time.Minute, []string{"go", "doc", p.pkg}, &out, &errOut)
		require.NoError(t, err, "go doc %s: %s", p.pkg, errOut.String())
		lines := strings.Split(out.String(), "\n")
		require.True(t, strings.HasPrefix(lines[0], "package "), "go doc %s: the first line is %q", p.pkg, lines[0])

		decl := regexp.MustCompile(`^(const|var|func|type) `)
		var opening []string // the lines before the first heading or declaration
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "# ") || decl.MatchString(l) {
				break
			}
			opening = append(opening, l)
		}
		text := strings.Join(opening, "\n")
		for _, n := range p.names {
			require.Regexp(t, `\b`+regexp.QuoteMeta(n)+`\b`, text, "go doc %s: the opening of the documentation does not name %s", p.pkg, n)
		}
		example := false
		for _, l := range opening {
			example = example || strings.HasPrefix(l, "    ") && strings.Contains(l, p.example)
		}
		require.True(t, example, "go doc %s: the opening of the documentation shows no %s… called:\n%s", p.pkg, p.example, text)

		for _, l := range lines {
			if !decl.MatchString(l) {
				continue
			}
			// An error must be the engine's value to match under errors.Is:
			// a sentinel of an internal package is the one alias allowed.
			sentinel := strings.HasPrefix(l, "var Err")
			require.False(t, !sentinel && internalRef.MatchString(l), "go doc %s: %q names an internal package", p.pkg, l)
			require.NotContains(t, l, "= func(", "go doc %s: %q hides code behind a function literal", p.pkg, l)
		}
	}
}
