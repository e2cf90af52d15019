package engine

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The state side of the engine — everything the FSM type exposes: Apply,
// Admit, Snapshot, Persist, Restore and every query — must be a pure
// function of the log. TestStateSideIsPure enforces it: it type-checks the
// package, walks the static call graph from every method of FSM and
// fsmSnapshot, and fails on any reachable use of the clock, randomness,
// the file system or network, goroutines, or the Lua, plugin and Raft
// packages. A call through an interface is not followed (the state side
// has none of its own); a function value taken is followed like a call.

// impurePackages may not be used by anything the state side reaches.
var impurePackages = []string{
	"os", "os/exec", "net", "net/http", "syscall", "math/rand", "math/rand/v2", "crypto/rand", "log/slog",
	"github.com/yuin/gopher-lua", "github.com/hashicorp/", "github.com/heraldhq/herald/rules",
	"github.com/heraldhq/herald/plugins", "github.com/heraldhq/herald/cluster",
}

// impureTime are the clock's functions: Apply takes its time from the
// command, stamped by the leader.
var impureTime = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"}

func TestStateSideIsPure(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("type-checks the package from source")
	}
	found, err := impureReach(".", "FSM", "fsmSnapshot")
	require.NoError(t, err)
	require.Empty(t, found, "the state side reaches impure code:\n%s", strings.Join(found, "\n"))
}

// TestPurityCheckCatchesTheClock is the failing example: a state machine
// whose Apply reads the clock through a helper, and one that starts a
// goroutine, are caught with the path that reaches them.
func TestPurityCheckCatchesTheClock(t *testing.T) {
	t.Parallel()
	found, err := impureReach(filepath.Join("testdata", "impure"), "FSM")
	require.NoError(t, err)
	require.Equal(t, []string{
		"apply.go:14: (*FSM).Apply → stamp: time.Now",
		"apply.go:17: (*FSM).Spawn: go statement",
	}, found)
}

// impureReach lists every impure use reachable from the methods of the
// named types of the package in dir, as "file:line: path: what".
func impureReach(dir string, roots ...string) ([]string, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("purity/check", fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("type-check %s: %w", dir, err)
	}
	decls := map[types.Object]*ast.FuncDecl{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				decls[info.Defs[fd.Name]] = fd
			}
		}
	}
	// path[f] is how f was reached, for the message.
	path := map[types.Object]string{}
	var queue []types.Object
	for _, name := range roots {
		tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
		if !ok {
			return nil, fmt.Errorf("no type %s in %s", name, dir)
		}
		ms := types.NewMethodSet(types.NewPointer(tn.Type()))
		for i := range ms.Len() {
			m := ms.At(i).Obj()
			path[m] = fmt.Sprintf("(*%s).%s", name, m.Name())
			queue = append(queue, m)
		}
	}
	var found []string
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		fd := decls[fn]
		if fd == nil || fd.Body == nil {
			continue
		}
		report := func(pos token.Pos, what string) {
			p := fset.Position(pos)
			found = append(found, fmt.Sprintf("%s:%d: %s: %s", filepath.Base(p.Filename), p.Line, path[fn], what))
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				report(n.Pos(), "go statement")
			case *ast.Ident:
				obj := info.Uses[n]
				if obj == nil || obj.Pkg() == nil {
					return true
				}
				if obj.Pkg() == pkg {
					if _, ok := obj.(*types.Func); ok {
						if _, seen := path[obj]; !seen {
							path[obj] = path[fn] + " → " + obj.Name()
							queue = append(queue, obj)
						}
					}
					return true
				}
				if what := impure(obj); what != "" {
					report(n.Pos(), what)
				}
			}
			return true
		})
	}
	slices.Sort(found)
	return slices.Compact(found), nil
}

// impure says what is wrong with using obj on the state side, or "".
func impure(obj types.Object) string {
	p := obj.Pkg().Path()
	if fn, ok := obj.(*types.Func); ok && p == "time" && fn.Signature().Recv() == nil && slices.Contains(impureTime, obj.Name()) {
		return "time." + obj.Name()
	}
	for _, bad := range impurePackages {
		if p == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(p, bad)) || strings.HasPrefix(p, bad+"/") {
			return p + "." + obj.Name()
		}
	}
	return ""
}
