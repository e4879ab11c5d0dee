package tooling_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// skipped are the folders (slash paths from the module's root; "." is the
// root package alone) whose tests TestBoundedWaits does not read, each
// with the reason.
var skipped = map[string]string{
	// The suite's cases run under its own watchdog (watchdog.go), which
	// fails a hung case naming it; its fakes wait for ever on purpose, to
	// prove that watchdog.
	"conformance": "bounded by the suite's watchdog",
}

// exempt is the comment that lets a line wait without a bound; a reason
// must follow it.
const exempt = "// unbounded:"

// blocking are the names of the calls that wait for something that may
// never come (a peer, a device, a request) and take a context to bound
// that wait; a name ending in Block (comm.AllreduceBlock) counts as the
// name without it.
var blocking = map[string]bool{
	"Accept": true, "Allgather": true, "Allreduce": true, "Alltoall": true, "Await": true,
	"Barrier": true, "Bcast": true, "Copy": true, "Dial": true, "Dup": true, "ExchangeKeys": true, "Execute": true,
	"Flush": true, "Gather": true, "Get": true, "JoinOn": true, "ParallelFor": true, "ParallelRange": true,
	"Put": true, "PutNotify": true,
	"Recv": true, "Reduce": true, "ReduceScatter": true, "Scatter": true, "Send": true,
	"Sendrecv": true, "Split": true, "Synchronize": true, "Wait": true, "WaitAll": true,
	"WaitAny": true, "WaitDone": true, "WaitNotification": true,
}

// TestBoundedWaits keeps every wait of the module's tests bounded, so that
// a lost wake-up fails the test in seconds naming what it waited for
// (internal/tooling/testwait), never in go test's timeout. In the
// _test.go files, whatever their build tags, it finds:
//
//   - a receive from a channel (<-ch, v := <-ch, f(<-ch)) that is not a
//     case of a select: use testwait.Recv or testwait.Closed, or a select
//     with a deadline;
//   - x.Wait() without arguments on a sync.WaitGroup (x declared one in the
//     file, or named wg or …wg): use testwait.Group;
//   - a context that never ends — context.Background(), context.TODO(),
//     t.Context() (it ends with the test, not before), or a variable that
//     the function sets only to one of them — passed to a blocking call
//     (Recv, Send, Wait, Synchronize, Flush, a collective…; see blocking):
//     use testwait.Ctx or testwait.Call, or a context with a deadline.
//
// It reads the functions of the files, not their methods: a method of a
// test file belongs to a fake (a broken communicator, a request that never
// completes), whose waits are the code under test's, which the test's own
// bounded wait for it ends. What a goroutine the test starts does is not
// its business either (go f()), nor what a function literal passed to a
// call does (wg.Go, a stream's Enqueue, testwait.Call) but to t.Run,
// t.Cleanup and synctest.Test, for the same reason. Benchmarks and their helpers
// (a *testing.B parameter), whose length -benchtime sets, are not read;
// examples are read for contexts only (a context with a deadline is enough
// there, as they print). A line may wait without a bound when it says
// why: "// unbounded: <reason>".
//
// It cannot tell, from the syntax alone, a select without a deadline, a
// range over a channel, or a wait of an errgroup.Group; those stay the
// reviewer's.
func TestBoundedWaits(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	var problems []string
	files := 0
	fset := token.NewFileSet()
	err = walkGo(root, fset, parser.ParseComments,
		func(rel string) bool { return skipped[rel] != "" },
		func(rel string) bool { return strings.HasSuffix(rel, "_test.go") && skipped[path.Dir(rel)] == "" },
		func(rel string, f *ast.File) error {
			files++
			problems = append(problems, unboundedWaits(fset, rel, f)...)
			return nil
		})
	require.NoError(t, err)
	require.Positive(t, files, "no test file read")
	if len(problems) > 0 {
		t.Errorf("%d unbounded waits in tests (bound them with internal/tooling/testwait, or say why not with %q):\n%s",
			len(problems), exempt+" <reason>", strings.Join(problems, "\n"))
	}
}

// unboundedWaits returns the unbounded waits of f, a test file named name,
// one "name:line: what" each, in the order of the file.
func unboundedWaits(fset *token.FileSet, name string, f *ast.File) []string {
	var problems []string
	reasons := map[int]string{} // line → the reason of its exemption
	for _, g := range f.Comments {
		for _, c := range g.List {
			if reason, ok := strings.CutPrefix(c.Text, exempt); ok {
				line := fset.Position(c.Pos()).Line
				reasons[line] = strings.TrimSpace(reason)
				if reasons[line] == "" {
					problems = append(problems, fmt.Sprintf("%s:%d: %q without a reason", name, line, exempt))
				}
			}
		}
	}
	report := func(n ast.Node, format string, args ...any) {
		line := fset.Position(n.Pos()).Line
		if _, ok := reasons[line]; !ok {
			problems = append(problems, fmt.Sprintf("%s:%d: ", name, line)+fmt.Sprintf(format, args...))
		}
	}
	groups := waitGroups(f)
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil || fd.Recv != nil || benchmark(fd) {
			continue
		}
		example := strings.HasPrefix(fd.Name.Name, "Example")
		endless := endlessContexts(fd.Body)
		cases := map[ast.Expr]bool{} // the receives that are cases of a select
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				return false
			case *ast.CommClause:
				switch c := n.Comm.(type) {
				case *ast.ExprStmt:
					cases[c.X] = true
				case *ast.AssignStmt:
					cases[c.Rhs[0]] = true
				}
			case *ast.UnaryExpr:
				if n.Op == token.ARROW && !cases[n] && !example {
					report(n, "a receive from %s outside a select: use testwait.Recv or testwait.Closed", exprString(n.X))
				}
			case *ast.CallExpr:
				fn := calleeName(n.Fun)
				if fn == "Wait" && len(n.Args) == 0 && !example {
					if x := receiverName(n.Fun); groups[x] || strings.HasSuffix(strings.ToLower(x), "wg") {
						report(n, "%s.Wait() of a sync.WaitGroup: use testwait.Group", exprString(n.Fun.(*ast.SelectorExpr).X))
					}
				}
				if blocking[strings.TrimSuffix(fn, "Block")] {
					for _, a := range n.Args {
						if c := endlessContext(a, endless); c != "" {
							report(n, "%s(%s, …) waits for ever: use testwait.Ctx or testwait.Call, or a context with a deadline", fn, c)
						}
					}
				}
				// A function passed to a call runs where that call
				// runs it (a goroutine, a stream, a fake): its waits are
				// not the test's, but for the tests' own t.Run,
				// t.Cleanup and synctest.Test.
				ast.Inspect(n.Fun, visit)
				for _, a := range n.Args {
					if _, ok := a.(*ast.FuncLit); !ok || runsHere(n) {
						ast.Inspect(a, visit)
					}
				}
				return false
			}
			return true
		}
		ast.Inspect(fd.Body, visit)
	}
	return problems
}

// benchmark reports a benchmark or a helper of benchmarks: a function
// with a *testing.B parameter.
func benchmark(fd *ast.FuncDecl) bool {
	for _, p := range fd.Type.Params.List {
		if s, ok := p.Type.(*ast.StarExpr); ok && exprString(s.X) == "testing.B" {
			return true
		}
	}
	return false
}

// runsHere reports a call that runs its function argument on the test's
// goroutine or one the testing package waits for: t.Run, t.Cleanup,
// synctest.Test.
func runsHere(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	return sel.Sel.Name == "Run" || sel.Sel.Name == "Cleanup" || exprString(sel) == "synctest.Test"
}

// waitGroups returns the names that f declares as a sync.WaitGroup (or a
// pointer to one): variables, parameters and fields.
func waitGroups(f *ast.File) map[string]bool {
	isGroup := func(e ast.Expr) bool {
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
			e = u.X
		}
		if c, ok := e.(*ast.CompositeLit); ok {
			e = c.Type
		}
		if c, ok := e.(*ast.CallExpr); ok && calleeName(c.Fun) == "new" && len(c.Args) == 1 {
			e = c.Args[0]
		}
		sel, ok := e.(*ast.SelectorExpr)
		return ok && exprString(sel) == "sync.WaitGroup"
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			if isGroup(n.Type) {
				for _, id := range n.Names {
					out[id.Name] = true
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if n.Type != nil && isGroup(n.Type) || i < len(n.Values) && isGroup(n.Values[i]) {
					out[id.Name] = true
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && isGroup(n.Rhs[i]) {
						out[id.Name] = true
					}
				}
			}
		}
		return true
	})
	return out
}

// endlessContexts returns the variables of body that are only ever set to
// a context that never ends by itself (see endlessContext).
func endlessContexts(body *ast.BlockStmt) map[string]bool {
	out := map[string]bool{}
	other := map[string]bool{}
	set := func(l, r ast.Expr) {
		id, ok := l.(*ast.Ident)
		if !ok {
			return
		}
		if r != nil && endlessContext(r, nil) != "" {
			out[id.Name] = true
		} else {
			other[id.Name] = true
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				var r ast.Expr
				if len(n.Lhs) == len(n.Rhs) {
					r = n.Rhs[i]
				}
				set(l, r)
			}
		case *ast.ValueSpec:
			for i, l := range n.Names {
				var r ast.Expr
				if i < len(n.Values) {
					r = n.Values[i]
				}
				set(l, r)
			}
		case *ast.FuncLit:
			for _, p := range n.Type.Params.List {
				for _, id := range p.Names {
					other[id.Name] = true
				}
			}
		}
		return true
	})
	for name := range other {
		delete(out, name)
	}
	return out
}

// endlessContext returns how e reads when it is a context that never ends
// by itself — context.Background(), context.TODO(), t.Context() (or b's,
// tb's), or a variable of vars — and "" otherwise.
func endlessContext(e ast.Expr, vars map[string]bool) string {
	switch e := e.(type) {
	case *ast.Ident:
		if vars[e.Name] {
			return e.Name
		}
	case *ast.CallExpr:
		s := exprString(e.Fun)
		switch s {
		case "context.Background", "context.TODO", "t.Context", "b.Context", "tb.Context":
			if len(e.Args) == 0 {
				return s + "()"
			}
		}
	}
	return ""
}

// calleeName is the name of the function a call calls, without its
// package, receiver or type arguments: "Recv" for comm.Recv[int].
func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	case *ast.IndexExpr:
		return calleeName(f.X)
	case *ast.IndexListExpr:
		return calleeName(f.X)
	}
	return ""
}

// receiverName is the name of a method call's receiver: "wg" for wg.Wait
// and s.wg.Wait, "" for a call of a function.
func receiverName(fun ast.Expr) string {
	if sel, ok := fun.(*ast.SelectorExpr); ok {
		return identName(sel.X)
	}
	return ""
}

// exprString writes a selector or an identifier as the source does, and
// other expressions as "…".
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.CallExpr:
		return exprString(e.Fun) + "()"
	}
	return "…"
}

// TestUnboundedWaitsFound runs the check of TestBoundedWaits on small test
// files: each unbounded wait is reported on its line, each bounded one,
// and each that says why, is not.
func TestUnboundedWaitsFound(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string // "line: the start of the report"; the body starts on line 4
	}{
		{"receive statement", "<-done", []string{"4: a receive from done outside a select"}},
		{"receive assigned", "v, ok := <-ch\n_, _ = v, ok", []string{"4: a receive from ch outside a select"}},
		{"receive in a call", "require.NoError(t, <-errc)", []string{"4: a receive from errc outside a select"}},
		{"receive of a context", "<-ctx.Done()", []string{"4: a receive from ctx.Done() outside a select"}},
		{"receive in a cleanup", "t.Cleanup(func() { <-exited })", []string{"4: a receive from exited outside a select"}},
		{"receive in a subtest", "t.Run(\"x\", func(t *testing.T) {\n<-done\n})", []string{"5: a receive from done outside a select"}},
		{"receive in a select", "select {\ncase <-done:\ncase v := <-ch:\n_ = v\ncase <-time.After(time.Second):\n}", nil},
		{"receive in a goroutine", "go func() { <-release }()", nil},
		{"receive in a function the code runs", "s.Enqueue(func(context.Context) error { <-gate; return nil })", nil},
		{"receive bounded", "testwait.Recv(t, done, \"the worker\")", nil},
		{"receive said why", "<-done // unbounded: closed by the line above", nil},
		{"exemption without reason", "<-done // unbounded:", []string{"4: \"// unbounded:\" without a reason"}},
		{"group by name", "wg.Wait()", []string{"4: wg.Wait() of a sync.WaitGroup"}},
		{"group of a field", "s.wg.Wait()", []string{"4: s.wg.Wait() of a sync.WaitGroup"}},
		{"group by type", "var started sync.WaitGroup\nstarted.Wait()", []string{"5: started.Wait() of a sync.WaitGroup"}},
		{"group made by new", "g := new(sync.WaitGroup)\ng.Wait()", []string{"5: g.Wait() of a sync.WaitGroup"}},
		{"other Wait without arguments", "cmd.Wait()", nil},
		{"group bounded", "testwait.Group(t, &wg, \"the senders\")", nil},
		{"background context", "comm.Send(context.Background(), c, b, 1, 0)", []string{"4: Send(context.Background(), …) waits for ever"}},
		{"todo context", "r.Wait(context.TODO())", []string{"4: Wait(context.TODO(), …) waits for ever"}},
		{"the test's context", "s.Synchronize(t.Context())", []string{"4: Synchronize(t.Context(), …) waits for ever"}},
		{"a Block collective", "comm.AllreduceBlock[int](context.Background(), c, s, r, op)", []string{"4: AllreduceBlock(context.Background(), …) waits for ever"}},
		{"a variable of one", "ctx := context.Background()\ncomm.Barrier(ctx, c)", []string{"5: Barrier(ctx, …) waits for ever"}},
		{"a variable set again", "ctx := context.Background()\nctx, cancel := context.WithTimeout(ctx, time.Second)\ndefer cancel()\ncomm.Barrier(ctx, c)", nil},
		{"a context with a deadline", "ctx, cancel := context.WithTimeout(context.Background(), time.Second)\ndefer cancel()\ncomm.Recv(ctx, c, b, 0, 0)", nil},
		{"a bounded context", "comm.Recv(testwait.Ctx(t), c, b, 0, 0)", nil},
		{"a call that does not wait", "xpu.Open(context.Background(), \"cpu\", nil)", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "package x_test\n\nfunc TestX(t *testing.T) {\n" + tc.body + "\n}\n"
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x_test.go", src, parser.ParseComments)
			require.NoError(t, err)
			got := unboundedWaits(fset, "x_test.go", f)
			require.Len(t, got, len(tc.want), "reports: %q", got)
			for i, w := range tc.want {
				require.True(t, strings.HasPrefix(got[i], "x_test.go:"+w), "report %q, want one that starts %q", got[i], "x_test.go:"+w)
			}
		})
	}

	// What is not read: the methods of fakes, benchmarks and their
	// helpers, and examples but for their contexts.
	src := `package x_test

func (f fake) Wait(context.Context) error { <-f.never; return nil }

func BenchmarkX(b *testing.B) { wg.Wait(); comm.Barrier(context.Background(), c) }

func sendAll(b *testing.B, c comm.Comm) { <-ready }

func ExampleX() {
	<-done
	wg.Wait()
	comm.Barrier(context.Background(), c)
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x_test.go", src, parser.ParseComments)
	require.NoError(t, err)
	got := unboundedWaits(fset, "x_test.go", f)
	require.Equal(t, []string{"x_test.go:12: Barrier(context.Background(), …) waits for ever: use testwait.Ctx or testwait.Call, or a context with a deadline"}, got)
}
