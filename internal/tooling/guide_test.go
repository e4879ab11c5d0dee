package tooling_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// guideBlock is one Go program of docs/guide.md, with how to run it and
// what it prints.
type guideBlock struct {
	line    int      // the line of its opening fence, from 1
	section string   // the heading above it
	src     string   // the program
	env     []string // NAME=VALUE pairs its command line sets
	ranks   int      // the ranks of `xpu run -n N`; 0 for a plain run
	want    string   // the ```text block after it; "" when none follows
	hasWant bool
}

// name says where the block is, for the subtest's name and the messages.
func (b guideBlock) name() string {
	return fmt.Sprintf("guide.md:%d", b.line)
}

// guideCommand is the comment that may open a program of the guide and say
// how to run it.
const guideCommand = "// $ "

// parseGuide returns the Go programs of a markdown guide, by the
// conventions TestGuide documents.
func parseGuide(text string) ([]guideBlock, error) {
	var blocks []guideBlock
	var cur []string
	fence, section := "", ""
	start := 0
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		trim := strings.TrimSpace(l)
		switch {
		case fence == "" && strings.HasPrefix(trim, "#"):
			section = strings.TrimSpace(strings.TrimLeft(trim, "#"))
		case fence == "" && strings.HasPrefix(trim, "```"):
			fence, start, cur = trim, i+1, cur[:0]
		case fence != "" && trim == "```":
			body := strings.Join(cur, "\n") + "\n"
			switch fence {
			case "```go":
				b := guideBlock{line: start, section: section, src: body}
				if err := b.parseCommand(); err != nil {
					return nil, err
				}
				blocks = append(blocks, b)
			case "```text":
				if n := len(blocks); n > 0 && !blocks[n-1].hasWant {
					blocks[n-1].want, blocks[n-1].hasWant = body, true
				}
			}
			fence = ""
		case fence != "":
			cur = append(cur, l)
		}
	}
	if fence != "" {
		return nil, fmt.Errorf("guide.md:%d: the fence %s is never closed", start, fence)
	}
	return blocks, nil
}

// parseCommand reads the block's "// $ " line, when its first line is one:
// [NAME=VALUE ...] [xpu run -n N] go run .
func (b *guideBlock) parseCommand() error {
	first, _, _ := strings.Cut(b.src, "\n")
	cmd, ok := strings.CutPrefix(first, guideCommand)
	if !ok {
		return nil
	}
	words := strings.Fields(cmd)
	for len(words) > 0 && strings.Contains(words[0], "=") {
		b.env = append(b.env, words[0])
		words = words[1:]
	}
	if len(words) >= 4 && words[0] == "xpu" && words[1] == "run" && words[2] == "-n" {
		n, err := strconv.Atoi(words[3])
		if err != nil || n < 1 {
			return fmt.Errorf("%s: %q: -n takes a number of ranks", b.name(), first)
		}
		b.ranks, words = n, words[4:]
	}
	if strings.Join(words, " ") != "go run ." {
		return fmt.Errorf("%s: %q: the command must be [NAME=VALUE ...] [xpu run -n N] go run .", b.name(), first)
	}
	return nil
}

// TestGuide compiles and runs every Go program of docs/guide.md and
// compares what it prints with what the guide says it prints, so that the
// guide cannot rot. The guide's conventions:
//
//   - every ```go block is a whole program (package main);
//   - its first line may be a comment "// $ COMMAND" that says how to run
//     it, COMMAND being "[NAME=VALUE ...] [xpu run -n N] go run ."; without
//     one it runs as "go run .";
//   - the first ```text block after it, before the next ```go block, is
//     what it prints on stdout (under xpu run, with the ranks' prefixes),
//     compared line by line with trailing spaces dropped; every program
//     has one.
//
// Each program is built once with the module's own packages (go build of
// a file, from the module root) and run with a bound, in an environment
// rid of the variables of xpu and of launchers, so that neither a
// developer's XPU_BACKEND nor a test run by mpirun or srun changes what it
// prints. A program run under `xpu run` runs under the xpu command built
// from cmd/xpu.
func TestGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the guide's programs; not with -short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	text, err := os.ReadFile(filepath.Join(root, "docs", "guide.md"))
	require.NoError(t, err)
	blocks, err := parseGuide(string(text))
	require.NoError(t, err)
	require.NotEmpty(t, blocks, "docs/guide.md has no ```go block")

	dir := t.TempDir()
	env := guideEnv()
	xpuBin := ""
	for _, b := range blocks {
		t.Run(b.name(), func(t *testing.T) {
			require.True(t, b.hasWant, "%s (%s): no ```text block after it says what it prints", b.name(), b.section)
			bin := filepath.Join(dir, fmt.Sprintf("guide%d", b.line))
			src := bin + ".go"
			// The line directive makes the compiler's messages point into the guide.
			prog := fmt.Sprintf("//line docs/guide.md:%d\n%s", b.line+1, b.src)
			require.NoError(t, os.WriteFile(src, []byte(prog), 0o644))
			out, err := guideExec(t, root, env, 3*time.Minute, "go", "build", "-o", bin, src)
			require.NoError(t, err, "%s (%s): the program does not build:\n%s", b.name(), b.section, out)

			args := []string{bin}
			if b.ranks > 0 {
				if xpuBin == "" {
					xpuBin = filepath.Join(dir, "xpu")
					out, err := guideExec(t, root, env, 3*time.Minute, "go", "build", "-o", xpuBin, "./cmd/xpu")
					require.NoError(t, err, "building the xpu command:\n%s", out)
				}
				args = []string{xpuBin, "run", "-n", strconv.Itoa(b.ranks), "--timeout", "50s", bin}
			}
			var stdout, stderr bytes.Buffer
			err = guideRun(root, append(env, b.env...), time.Minute, args, &stdout, &stderr)
			require.NoError(t, err, "%s (%s): the program fails:\nstdout:\n%s\nstderr:\n%s", b.name(), b.section, stdout.String(), stderr.String())
			require.Equal(t, trimLines(b.want), trimLines(stdout.String()),
				"%s (%s): the program prints something else than the ```text block after it (stderr:\n%s)", b.name(), b.section, stderr.String())
		})
	}
}

// guideEnv returns this process's environment without the variables of xpu
// and of launchers (Open MPI, PMIx, PMI, Slurm).
func guideEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		launcher := false
		for _, p := range []string{"XPU_", "OMPI_", "PMIX_", "PMI_", "SLURM_"} {
			launcher = launcher || strings.HasPrefix(name, p)
		}
		if !launcher {
			env = append(env, kv)
		}
	}
	return env
}

// guideExec runs a command in dir within limit and returns its combined
// output.
func guideExec(t *testing.T, dir string, env []string, limit time.Duration, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := guideRun(dir, env, limit, args, &out, &out)
	return out.String(), err
}

// guideRun runs args in dir within limit; an error says when the command
// ran past it.
func guideRun(dir string, env []string, limit time.Duration, args []string, stdout, stderr *bytes.Buffer) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s did not finish within %v: %w", strings.Join(args, " "), limit, err)
	}
	return err
}

// trimLines drops the trailing spaces of each line of s and its trailing
// blank lines.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// TestParseGuide holds parseGuide to the conventions TestGuide documents.
func TestParseGuide(t *testing.T) {
	blocks, err := parseGuide("# One\n\n```go\npackage main\n```\n\nprints\n\n```text\na\n```\n\n```text\nnot its output\n```\n" +
		"## Two\n```go\n// $ XPU_BACKEND=cuda,cpu A=1 xpu run -n 3 go run .\npackage main\n```\n```sh\nxpu info\n```\n```go\npackage main\n```\n")
	require.NoError(t, err)
	require.Len(t, blocks, 3)
	require.Equal(t, guideBlock{line: 3, section: "One", src: "package main\n", want: "a\n", hasWant: true}, blocks[0])
	require.Equal(t, "Two", blocks[1].section)
	require.Equal(t, []string{"XPU_BACKEND=cuda,cpu", "A=1"}, blocks[1].env)
	require.Equal(t, 3, blocks[1].ranks)
	require.False(t, blocks[1].hasWant, "the sh block is no output, and the text block before the go block is another's")
	require.False(t, blocks[2].hasWant)

	for _, bad := range []string{
		"```go\n// $ go build .\npackage main\n```\n",
		"```go\n// $ xpu run -n x go run .\npackage main\n```\n",
		"```go\n// $ xpu run -n 0 go run .\npackage main\n```\n",
		"```go\npackage main\n",
	} {
		_, err := parseGuide(bad)
		require.Error(t, err, "%q", bad)
	}
}

// TestGuideLinked: the README links the guide.
func TestGuideLinked(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(readme), "](docs/guide.md)"), "README.md does not link docs/guide.md")
}
