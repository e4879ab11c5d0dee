package tooling_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/backends/procs"
	"github.com/xpu-go/xpu/backends/rdma"
	"github.com/xpu-go/xpu/internal/jobenv"
	"github.com/xpu-go/xpu/internal/join"
	"github.com/xpu-go/xpu/internal/p2p"
	"github.com/xpu-go/xpu/internal/shm"
)

// TestBackendOptionsDocumentedOneWay: every backend documents the options
// of its Open one way. Each key is an exported constant Opt… of the
// backend's package, a plain string (an alias of an internal package's
// constant tells a go doc reader nothing), with a doc comment of its own
// that says what the key sets, its values and its default; and the package
// documentation has a section "# Options" with a row per key that names the
// key and its constant. A package whose Opt constants forward another
// backend's (tcp, the former name of procs) is left out: the backend it
// forwards documents them.
func TestBackendOptionsDocumentedOneWay(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	dirs, err := os.ReadDir(filepath.Join(root, "backends"))
	require.NoError(t, err)
	var problems []string
	checked := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join(root, "backends", d.Name())
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		fset := token.NewFileSet()
		type opt struct{ name, key string }
		var opts []opt
		pkgDoc := ""
		forwards := false
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			require.NoError(t, err)
			if file.Doc != nil {
				pkgDoc += file.Doc.Text()
			}
			for _, decl := range file.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if !n.IsExported() || !strings.HasPrefix(n.Name, "Opt") {
							continue
						}
						where := fmt.Sprintf("backends/%s: %s", d.Name(), n.Name)
						if len(vs.Values) <= i {
							problems = append(problems, where+": no value of its own")
							continue
						}
						if sel, ok := vs.Values[i].(*ast.SelectorExpr); ok {
							if x, ok := sel.X.(*ast.Ident); ok && !isInternalImport(file, x.Name) {
								forwards = true // another backend's option, documented there
								continue
							}
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							problems = append(problems, where+": the value is no plain string, which go doc would show as is")
							continue
						}
						key, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						doc := vs.Doc
						if doc == nil && len(gd.Specs) == 1 {
							doc = gd.Doc
						}
						if doc == nil || !strings.Contains(doc.Text(), n.Name) {
							problems = append(problems, where+": no doc comment of its own that names it")
						}
						opts = append(opts, opt{n.Name, key})
					}
				}
			}
		}
		if len(opts) == 0 {
			if !forwards {
				problems = append(problems, fmt.Sprintf("backends/%s: no Opt constant: a backend without options says so with none, but every backend here has some", d.Name()))
			}
			continue
		}
		section := ""
		if _, after, ok := strings.Cut(pkgDoc, "\n# Options\n"); ok {
			section, _, _ = strings.Cut(after, "\n# ")
		}
		if section == "" {
			problems = append(problems, fmt.Sprintf("backends/%s: the package documentation has no section # Options", d.Name()))
			continue
		}
		for _, o := range opts {
			checked++
			row := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(o.key) + `\s+` + regexp.QuoteMeta(o.name) + `\b`)
			if !row.MatchString(section) {
				problems = append(problems, fmt.Sprintf("backends/%s: the section # Options has no row %q %s", d.Name(), o.key, o.name))
			}
		}
	}
	require.NotZero(t, checked, "no option found: the walk is broken")
	if len(problems) > 0 {
		t.Errorf("%d options documented another way:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// isInternalImport reports whether the file imports the package it calls
// name from a path with an internal element.
func isInternalImport(f *ast.File, name string) bool {
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		local := filepath.Base(p)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == name {
			return strings.Contains("/"+p+"/", "/internal/")
		}
	}
	return false
}

// The constants written out for go doc's readers hold the values the
// engines beneath them read.
func TestWrittenOutConstantsMatchTheEngines(t *testing.T) {
	require.Equal(t, jobenv.Backend, xpu.EnvBackend)
	require.Equal(t, p2p.OptLimit, local.OptEagerLimit)
	require.Equal(t, p2p.OptBudget, local.OptEagerBudget)
	require.Equal(t, p2p.OptLimit, procs.OptEagerLimit)
	require.Equal(t, p2p.OptBudget, procs.OptEagerBudget)
	require.Equal(t, join.OptTimeout, procs.OptJoinTimeout)

	require.Equal(t, shm.DefaultSpin, procs.DefaultShmSpin)
	require.Equal(t, join.DefaultTimeout, procs.DefaultJoinTimeout)
	require.Equal(t, join.ProgressInterval, procs.JoinProgressInterval)
	require.Equal(t, jobenv.DefaultMasterPort, procs.DefaultMasterPort)
	require.Same(t, join.ErrAuth, procs.ErrAuth)
	require.Same(t, join.ErrProtocol, procs.ErrProtocol)
	require.Equal(t, []procs.LinkMode{procs.LinkMode(shm.Auto), procs.LinkMode(shm.SocketOnly), procs.LinkMode(shm.SharedOnly)},
		[]procs.LinkMode{procs.LinkAuto, procs.LinkTCP, procs.LinkShm})
	for internal, written := range map[string]string{
		jobenv.Rank: procs.EnvRank, jobenv.WorldSize: procs.EnvWorldSize,
		jobenv.MasterAddr: procs.EnvMasterAddr, jobenv.MasterPort: procs.EnvMasterPort,
		jobenv.JobSecret: procs.EnvJobSecret, jobenv.TCPTimeout: procs.EnvTimeout,
		jobenv.TCPSpin: procs.EnvSpin, jobenv.Links: procs.EnvLinks, jobenv.Node: procs.EnvNode,
		jobenv.ShmRing: procs.EnvShmRing, jobenv.ShmSpin: procs.EnvShmSpin,
		jobenv.JoinTimeout: procs.EnvJoinTimeout,
		jobenv.RDMADevice:  rdma.EnvDevice, jobenv.RDMAAddr: rdma.EnvAddr, jobenv.RDMATimeout: rdma.EnvTimeout,
	} {
		require.Equal(t, internal, written)
	}
}
