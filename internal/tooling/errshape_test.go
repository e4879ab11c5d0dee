package tooling_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorShape keeps every error of the library in the one shape of ADR 15
// and ADR 30, as a linter would, so that a new backend cannot drift from it:
//
//   - a sentinel (a package-level Err… made by errors.New or xerr.NewKind) is
//     defined once in the module: another package that offers it re-exports
//     the same value (var ErrAuth = xerr.ErrAuth), so that errors.Is matches
//     across backends and each has one parent;
//   - no errors.Join of a sentinel and its detail (errors.Join(err,
//     ErrAuth)): it prints two lines where xerr.Detail prints one;
//   - no error formatted with %v or %s into fmt.Errorf, xerr.Errorf or
//     xerr.Detail: the cause's sentinel would be lost (%w keeps it) — but
//     in the conformance suite's failure reports and in usage errors, which
//     show an error without standing for it;
//   - in the backends, no message that starts with its sentinel ("%w:
//     detail"): the place comes first, the detail, and the sentinel last
//     (xerr.Errorf's shape, ADR 15).
//
// It reads every non-test file of the module but the tooling's with
// go/parser, whatever its build tags.
func TestErrorShape(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	var problems []string
	defined := map[string][]string{} // sentinel name → where a constructor defines it
	fset := token.NewFileSet()
	err = walkGo(root, fset, parser.ParseComments,
		func(rel string) bool { return rel == "examples" || rel == "internal/tooling" },
		func(rel string) bool { return !strings.HasSuffix(rel, "_test.go") },
		func(rel string, f *ast.File) error {
			at := func(n ast.Node) string {
				pos := fset.Position(n.Pos())
				return fmt.Sprintf("%s:%d", rel, pos.Line)
			}
			for name, n := range sentinels(f) {
				defined[name] = append(defined[name], at(n))
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				fn := callee(call)
				if fn == "errors.Join" && slices.ContainsFunc(call.Args, isSentinel) {
					problems = append(problems, at(call)+": errors.Join of a sentinel prints two lines: use xerr.Detail(sentinel, \"…: %w\", err)")
				}
				format, args, ok := formatted(fn, call)
				if !ok {
					return true
				}
				if fn == "fmt.Errorf" && strings.HasPrefix(format, "%w") && len(args) > 0 && isSentinel(args[0]) &&
					strings.HasPrefix(rel, "backends/") {
					problems = append(problems, at(call)+": a message that starts with its sentinel: put the operation first, the sentinel last (xerr.Errorf)")
				}
				if strings.HasPrefix(rel, "conformance/") || slices.ContainsFunc(args, isUsage) {
					// The suite's failures say what a backend returned
					// ("error %v, want ErrTruncated"): it must not match
					// what it describes. A usage error shows a flag's
					// parse error, which must not leak flag.ErrHelp.
					return true
				}
				for i, verb := range verbs(format) {
					if i < len(args) && (verb == 'v' || verb == 's') && isError(args[i]) {
						problems = append(problems, fmt.Sprintf("%s: %%%c of an error loses its sentinel: use %%w", at(call), verb))
					}
				}
				return true
			})
			return nil
		})
	require.NoError(t, err)
	for name, where := range defined {
		dirs := map[string]bool{}
		for _, w := range where {
			dirs[filepath.Dir(w)] = true
		}
		if len(dirs) > 1 {
			slices.Sort(where)
			problems = append(problems, fmt.Sprintf("%s is defined %d times (%s): define it once (in xerr) and re-export it",
				name, len(where), strings.Join(where, ", ")))
		}
	}
	slices.Sort(problems)
	if len(problems) > 0 {
		t.Errorf("%d errors out of shape (docs/adr/0030-errors-defined-once.md):\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// sentinels returns the package-level Err… variables f defines with a
// constructor (errors.New, xerr.NewKind), by name. A platform's twin files
// (cma_linux.go, cma_other.go) define one sentinel in one package: the
// name is qualified by the package's directory, so that only definitions in
// two packages count twice.
func sentinels(f *ast.File) map[string]ast.Node {
	out := map[string]ast.Node{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Err") || i >= len(vs.Values) {
					continue
				}
				if call, ok := vs.Values[i].(*ast.CallExpr); ok {
					if fn := callee(call); fn == "errors.New" || fn == "xerr.NewKind" || fn == "NewKind" {
						out[name.Name] = name
					}
				}
			}
		}
	}
	return out
}

// callee names the function a call calls: "pkg.Func", "Func", or "".
func callee(call *ast.CallExpr) string {
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name
	case *ast.SelectorExpr:
		if x, ok := fn.X.(*ast.Ident); ok {
			return x.Name + "." + fn.Sel.Name
		}
	}
	return ""
}

// formatted returns the format string and its arguments of a call that
// builds an error from a format, ok false for any other call or a format
// that is not a literal.
func formatted(fn string, call *ast.CallExpr) (format string, args []ast.Expr, ok bool) {
	at := map[string]int{"fmt.Errorf": 0, "xerr.Errorf": 3, "xerr.Detail": 1, "Errorf": -1, "Detail": -1}[fn]
	switch fn {
	case "fmt.Errorf", "xerr.Errorf", "xerr.Detail":
	default:
		return "", nil, false
	}
	if at < 0 || len(call.Args) <= at {
		return "", nil, false
	}
	lit, ok := call.Args[at].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", nil, false
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return "", nil, false
	}
	return s, call.Args[at+1:], true
}

// verbs returns the verbs of a format, one per argument it takes.
func verbs(format string) []rune {
	var out []rune
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.ContainsRune("+-# 0123456789.[]*", rune(format[i])) {
			if format[i] == '*' {
				out = append(out, '*')
			}
			i++
		}
		if i < len(format) && format[i] != '%' {
			out = append(out, rune(format[i]))
		}
	}
	return out
}

// identName is the name of an identifier or of a selector's field, "" for
// any other expression.
func identName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

// isSentinel reports an argument that names a sentinel (ErrAuth,
// xerr.ErrProtocol, errUnavailable), not an error value at hand.
func isSentinel(e ast.Expr) bool {
	name := identName(e)
	return len(name) > 3 && (strings.HasPrefix(name, "Err") || strings.HasPrefix(name, "err")) && name != "errs"
}

// isUsage reports the sentinel of a command's usage errors.
func isUsage(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	id, ok2 := e.(*ast.Ident)
	return ok && sel.Sel.Name == "ErrUsage" || ok2 && id.Name == "ErrUsage"
}

// isError reports an argument that is, by its name, an error: err, cause,
// an identifier or field ending in Err or err, or a call of Err().
func isError(e ast.Expr) bool {
	if x, ok := e.(*ast.CallExpr); ok {
		sel, ok := x.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Err" && len(x.Args) == 0
	}
	name := identName(e)
	switch {
	case name == "err" || name == "cause":
		return true
	case strings.HasSuffix(name, "Err") || strings.HasSuffix(name, "err"):
		return true
	}
	return false
}
