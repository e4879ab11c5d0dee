package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/xpu-go/xpu/xerr"
)

// GoRun is a `go run` command line taken apart:
//
//	go run [BuildFlags] Target [ProgArgs]
//
// Target is a package or a list of .go files, as `go run` takes it.
type GoRun struct {
	Go         string   // the go command, as given
	BuildFlags []string // flags for `go build`
	Target     []string // the package, or the .go files
	ProgArgs   []string // the program's arguments
}

// goBoolFlags are the flags of `go build` that take no value.
var goBoolFlags = map[string]bool{
	"a": true, "n": true, "v": true, "x": true, "work": true, "race": true, "msan": true,
	"asan": true, "cover": true, "trimpath": true, "linkshared": true, "modcacherw": true,
	"buildvcs": true, "json": true,
}

// ParseGoRun reports whether prog and args are a `go run` command line that
// Run can build once with `go build` and start as a binary, and takes it
// apart. It declines (ok false, and Run starts `go run` in every rank as
// given) when the line uses -exec, -o or -n, names a pkg@version, or has no
// target: those are left to `go run` itself.
func ParseGoRun(prog string, args []string) (g GoRun, ok bool) {
	base := strings.TrimSuffix(filepath.Base(prog), ".exe")
	if base != "go" || len(args) == 0 || args[0] != "run" {
		return GoRun{}, false
	}
	g.Go = prog
	a := args[1:]
	i := 0
	for i < len(a) {
		s := a[i]
		if s == "--" {
			i++
			break
		}
		if len(s) < 2 || s[0] != '-' {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(s, "-"), "=")
		switch {
		case name == "exec" || name == "o" || name == "n":
			return GoRun{}, false
		case hasValue || goBoolFlags[name]:
			g.BuildFlags = append(g.BuildFlags, s)
			i++
		case i+1 < len(a):
			g.BuildFlags = append(g.BuildFlags, s, a[i+1])
			i += 2
		default:
			return GoRun{}, false // a flag missing its value: let go run say so
		}
	}
	rest := a[i:]
	files := 0
	for files < len(rest) && strings.HasSuffix(rest[files], ".go") {
		files++
	}
	switch {
	case len(rest) == 0:
		return GoRun{}, false
	case files == 0:
		g.Target, g.ProgArgs = rest[:1], rest[1:]
	default:
		g.Target, g.ProgArgs = rest[:files], rest[files:]
	}
	if strings.Contains(g.Target[0], "@") {
		return GoRun{}, false // go build does not take pkg@version
	}
	return g, true
}

// binName is the name of the binary built for the target: its last path
// element (the package's directory or the first file without .go).
func (g GoRun) binName() string {
	t := g.Target[0]
	if strings.HasSuffix(t, ".go") {
		t = strings.TrimSuffix(filepath.Base(t), ".go")
	} else {
		t = filepath.Base(filepath.Clean(t))
	}
	if t == "." || t == ".." || t == string(filepath.Separator) || t == "" {
		t = "main"
	}
	if runtime.GOOS == "windows" {
		t += ".exe"
	}
	return t
}

// buildGoRun builds spec's program once when it is a `go run` command line
// (see ParseGoRun) and returns the binary and its arguments, with a cleanup
// that removes the binary; otherwise it returns spec's program unchanged.
// The build's own output goes to out's stderr, unprefixed.
func buildGoRun(ctx context.Context, spec *Spec, out *output) (prog string, args []string, cleanup func(), err error) {
	g, ok := ParseGoRun(spec.Prog, spec.Args)
	if !ok {
		return spec.Prog, spec.Args, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "xpu-run-")
	if err != nil {
		return "", nil, nil, xerr.Op(place, "", fmt.Errorf("build once for go run: %w", err))
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	bin := filepath.Join(dir, g.binName())
	bargs := append([]string{"build"}, g.BuildFlags...)
	bargs = append(bargs, "-o", bin)
	bargs = append(bargs, g.Target...)
	cmd := exec.CommandContext(ctx, g.Go, bargs...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	w := &streamWriter{out: out, w: out.stderr}
	cmd.Stdout, cmd.Stderr = w, w
	// The build's compilers go with it when it is cancelled.
	setGroup(cmd)
	cmd.Cancel = func() error {
		signalGroup(cmd.Process, os.Kill)
		return nil
	}
	cmd.WaitDelay = spec.Grace
	if err := cmd.Run(); err != nil {
		cleanup()
		if ctx.Err() != nil {
			return "", nil, nil, xerr.Op(place, "", fmt.Errorf("building %s: %w", strings.Join(g.Target, " "), ctx.Err()))
		}
		return "", nil, nil, xerr.Op(place, "", fmt.Errorf("%s %s: %w", g.Go, strings.Join(bargs, " "), err))
	}
	return bin, g.ProgArgs, cleanup, nil
}

// streamWriter writes straight through to one stream of an output, under
// its lock.
type streamWriter struct {
	out *output
	w   io.Writer
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.out.write(s.w, p)
	return len(p), nil
}
