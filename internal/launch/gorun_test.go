package launch

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseGoRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		prog string
		args []string
		ok   bool
		want GoRun
	}{
		{"package", "go", []string{"run", "./examples/allreduce"}, true,
			GoRun{Go: "go", Target: []string{"./examples/allreduce"}, ProgArgs: []string{}}},
		{"flags and args", "/usr/local/go/bin/go", []string{"run", "-race", "-tags", "a b", "-ldflags=-s -w", "./cmd/x", "-n", "4"}, true,
			GoRun{Go: "/usr/local/go/bin/go", BuildFlags: []string{"-race", "-tags", "a b", "-ldflags=-s -w"},
				Target: []string{"./cmd/x"}, ProgArgs: []string{"-n", "4"}}},
		{"files", "go", []string{"run", "main.go", "util.go", "arg.go.txt", "x"}, true,
			GoRun{Go: "go", Target: []string{"main.go", "util.go"}, ProgArgs: []string{"arg.go.txt", "x"}}},
		{"double dash flags", "go", []string{"run", "--race", "-C", "sub", "--", "."}, true,
			GoRun{Go: "go", BuildFlags: []string{"--race", "-C", "sub"}, Target: []string{"."}, ProgArgs: []string{}}},
		{"go.exe", "go.exe", []string{"run", "."}, true,
			GoRun{Go: "go.exe", Target: []string{"."}, ProgArgs: []string{}}},
		{"not go", "gofmt", []string{"run", "."}, false, GoRun{}},
		{"go build", "go", []string{"build", "."}, false, GoRun{}},
		{"go alone", "go", nil, false, GoRun{}},
		{"no target", "go", []string{"run"}, false, GoRun{}},
		{"no target after flags", "go", []string{"run", "-race"}, false, GoRun{}},
		{"flag without value", "go", []string{"run", "-tags"}, false, GoRun{}},
		{"exec", "go", []string{"run", "-exec", "sudo", "."}, false, GoRun{}},
		{"exec=", "go", []string{"run", "-exec=sudo", "."}, false, GoRun{}},
		{"dry run", "go", []string{"run", "-n", "."}, false, GoRun{}},
		{"output", "go", []string{"run", "-o", "x", "."}, false, GoRun{}},
		{"version", "go", []string{"run", "example.com/cmd@v1.2.3"}, false, GoRun{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := ParseGoRun(tc.prog, tc.args)
			assert.Equal(t, tc.ok, ok)
			if ok {
				if len(tc.want.ProgArgs) == 0 {
					assert.Empty(t, g.ProgArgs)
					g.ProgArgs, tc.want.ProgArgs = nil, nil
				}
				assert.Equal(t, tc.want, g)
			}
		})
	}
}

func TestGoRunBinName(t *testing.T) {
	for target, want := range map[string]string{
		"./examples/allreduce":  "allreduce",
		"./examples/allreduce/": "allreduce",
		".":                     "main",
		"main.go":               "main",
		"dir/tool.go":           "tool",
		"example.com/x/cmd/foo": "foo",
	} {
		got := GoRun{Target: []string{target}}.binName()
		if target == "." {
			assert.Equal(t, "main", got)
			continue
		}
		assert.Equal(t, want, got, target)
	}
}
