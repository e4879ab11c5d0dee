package tooling_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pkg is one directory of Go files of the module, as its non-test files'
// import lines say (every file, whatever its build tags, but those of
// //go:build ignore, which no build compiles).
type pkg struct {
	rel     string              // slash path from the module root, "." for the root
	imports map[string][]string // of non-test files: import path → the files importing it
	docs    []string            // first lines of the package comments of non-test files
}

// TestLayout keeps internal/ holding only what the library ships, and the
// developer tooling below internal/tooling:
//
//   - no package of internal/ outside internal/tooling imports a package of
//     backends/ (but from its tests): what the library ships does not
//     depend on every backend, as the tooling does;
//   - no package of the module outside internal/tooling and cmd/ imports
//     internal/tooling (but from its tests): the library does not ship it;
//   - every package of internal/ outside internal/tooling is reached from
//     the library's non-test code (the packages outside internal/, through
//     their non-test imports), or it belongs below internal/tooling;
//   - every package below internal/tooling says in the first line of its
//     documentation that it is tooling.
//
// It reads the import lines with go/parser, so it is quick and sees the
// files of every build tag (mpi, rdma, cuda...) at once.
func TestLayout(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	module := modulePath(t, root)
	pkgs := readPackages(t, root)
	require.Contains(t, pkgs, "internal/tooling", "the walk missed this very package")

	// local maps an import path of the module to its directory, "" for
	// any other.
	local := func(imp string) string {
		if imp == module {
			return "."
		}
		if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
			return rel
		}
		return ""
	}
	under := func(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }
	tooling := func(rel string) bool { return under(rel, "internal/tooling") }

	for _, p := range sorted(pkgs) {
		for _, imp := range sortedKeys(p.imports) {
			dep := local(imp)
			if dep == "" {
				continue
			}
			if under(p.rel, "internal") && !tooling(p.rel) && under(dep, "backends") {
				t.Errorf("%s imports %s: a package of internal/ that imports a backend is tooling (move it below internal/tooling) or the backend's own (below backends/<name>/internal)", strings.Join(p.imports[imp], ", "), imp)
			}
			if !tooling(p.rel) && !under(p.rel, "cmd") && tooling(dep) {
				t.Errorf("%s imports %s: the library does not ship internal/tooling; only cmd/, the tooling itself and _test.go files may import it", strings.Join(p.imports[imp], ", "), imp)
			}
		}
	}

	// The packages the library ships: from every package outside internal/,
	// what their non-test files import, transitively.
	shipped := map[string]bool{}
	var visit func(rel string)
	visit = func(rel string) {
		if shipped[rel] || pkgs[rel] == nil || tooling(rel) {
			return
		}
		shipped[rel] = true
		for imp := range pkgs[rel].imports {
			if dep := local(imp); dep != "" {
				visit(dep)
			}
		}
	}
	for _, p := range sorted(pkgs) {
		if !under(p.rel, "internal") {
			visit(p.rel)
		}
	}
	for _, p := range sorted(pkgs) {
		if under(p.rel, "internal") && !tooling(p.rel) && !shipped[p.rel] {
			t.Errorf("%s: no non-test code of the library imports it (only tests or tooling do): move it below internal/tooling", p.rel)
		}
	}

	for _, p := range sorted(pkgs) {
		if !tooling(p.rel) {
			continue
		}
		if len(p.docs) == 0 {
			t.Errorf("%s has no package documentation: its first line must say that it is tooling", p.rel)
		}
		for _, first := range p.docs {
			if !strings.Contains(first, "tooling") {
				t.Errorf("%s: the first line of its documentation, %q, does not say that it is tooling", p.rel, first)
			}
		}
	}
}

// modulePath reads the module line of root/go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	require.NoError(t, s.Err())
	t.Fatal("go.mod has no module line")
	return ""
}

// readPackages parses the import lines (and package comments) of every Go
// file of the module under root, leaving out testdata, directories named
// with a leading . or _, and nested modules (examples/arena).
func readPackages(t *testing.T, root string) map[string]*pkg {
	t.Helper()
	pkgs := map[string]*pkg{}
	err := walkGo(root, token.NewFileSet(), parser.ImportsOnly|parser.ParseComments, nil, nil,
		func(file string, f *ast.File) error {
			rel, name := path.Dir(file), path.Base(file)
			p := pkgs[rel]
			if p == nil {
				p = &pkg{rel: rel, imports: map[string][]string{}}
				pkgs[rel] = p
			}
			if strings.HasSuffix(name, "_test.go") {
				return nil // tests may import what they like
			}
			for _, imp := range f.Imports {
				ip, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					return err
				}
				p.imports[ip] = append(p.imports[ip], file)
			}
			if f.Doc != nil {
				first, _, _ := strings.Cut(f.Doc.Text(), "\n")
				p.docs = append(p.docs, first)
			}
			return nil
		})
	require.NoError(t, err)
	return pkgs
}

// walkGo parses, with mode, every Go file of the module under root and
// hands fn its slash path from root and its syntax. It leaves out
// testdata, vendor, directories named with a leading . or _, nested
// modules (examples/arena), //go:build ignore files, the directories
// skipDir names (by slash path from root) and the files want refuses (by
// slash path); skipDir and want may be nil.
func walkGo(root string, fset *token.FileSet, mode parser.Mode, skipDir, want func(rel string) bool,
	fn func(rel string, f *ast.File) error) error {
	return filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, file)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if file == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" ||
				(skipDir != nil && skipDir(rel)) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(file, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || (want != nil && !want(rel)) {
			return nil
		}
		f, err := parser.ParseFile(fset, file, nil, mode)
		if err != nil {
			return err
		}
		if ignored(f) {
			return nil
		}
		return fn(rel, f)
	})
}

// ignored reports whether f is a //go:build ignore file, which no build
// compiles (a generator run with go run).
func ignored(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, c := range g.List {
			if strings.TrimSpace(c.Text) == "//go:build ignore" {
				return true
			}
		}
	}
	return false
}

func sorted(pkgs map[string]*pkg) []*pkg {
	out := make([]*pkg, 0, len(pkgs))
	for _, p := range pkgs {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pkg) int { return strings.Compare(a.rel, b.rel) })
	return out
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
