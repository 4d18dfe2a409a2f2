package email

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

var movers = []Mover{ByAPI, ByCaller, BySchedule, ByWorker, ByReconciler, BySES, ByCampaign}

// TestMoveFollowsTheLifecycle tries every move by every mover: Move does exactly what the
// table lists, and a refused move leaves the email as it was.
func TestMoveFollowsTheLifecycle(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	earlier := now.Add(-time.Minute)
	allowed := 0
	for _, from := range append([]string{"", store.StatusSending}, Statuses...) {
		for _, to := range append([]string{store.StatusSending}, Statuses...) {
			for _, by := range movers {
				e := store.Email{ID: "em1", Status: from, LatestStatus: from, ClaimedAt: &earlier, UpdatedAt: earlier}
				before := e
				err := Move(&e, to, by, now)
				listed := false
				for _, tr := range Lifecycle {
					listed = listed || (tr.From == from && tr.To == to && tr.By == by)
				}
				switch {
				case listed && err != nil:
					t.Errorf("%s: %s → %s refused: %v", by, from, to, err)
				case !listed && !errors.Is(err, ErrTransition):
					t.Errorf("%s: %s → %s allowed, but the lifecycle does not list it", by, from, to)
				case !listed && !reflect.DeepEqual(e, before):
					t.Errorf("%s: refused %s → %s changed the email: %+v", by, from, to, e)
				case listed:
					allowed++
					if e.Status != to || !e.UpdatedAt.Equal(now) {
						t.Errorf("%s: %s → %s left %s, updated %v", by, from, to, e.Status, e.UpdatedAt)
					}
					if claimed := e.ClaimedAt != nil && e.ClaimedAt.Equal(now); claimed != (to == store.StatusSending) {
						t.Errorf("%s: %s → %s: claim %v (a claim is set by QUEUED → SENDING only, cleared otherwise)", by, from, to, e.ClaimedAt)
					}
				}
			}
		}
	}
	if allowed != len(Lifecycle) {
		t.Errorf("%d moves allowed, the lifecycle lists %d (a duplicate row?)", allowed, len(Lifecycle))
	}
	// Out of SENDING to QUEUED is the only way back before a send: no mover can take a
	// claimed email straight into a second claim.
	if Allowed(store.StatusSending, store.StatusSending, ByWorker) {
		t.Error("a worker may take over another's claim")
	}
}

// TestOnlyMoveSetsAStatus reads every non-test Go file of the module outside the store
// adapters (which persist the field) with its types, and finds no assignment to a
// store.Email's Status, and no store.Email literal that sets it, except in lifecycle.go.
func TestOnlyMoveSetsAStatus(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export,Dir,GoFiles,Module", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath, Export, Dir string
		GoFiles                 []string
		Module                  *struct{ Path string }
	}
	exports := map[string]string{}
	var ours []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "github.com/mailroom/mailroom" && !strings.Contains(p.ImportPath, "/pkg/store") {
			ours = append(ours, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, errors.New("no export data for " + path)
		}
		return os.Open(f)
	})
	checked := 0
	for _, p := range ours {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		checked++
		isEmail := func(tv types.Type) bool {
			if ptr, ok := tv.(*types.Pointer); ok {
				tv = ptr.Elem()
			}
			n, ok := tv.(*types.Named)
			return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/mailroom/mailroom/pkg/store" && n.Obj().Name() == "Email"
		}
		for i, f := range files {
			if p.ImportPath == "github.com/mailroom/mailroom/pkg/email" && p.GoFiles[i] == "lifecycle.go" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					for _, lhs := range n.Lhs {
						if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Status" && isEmail(info.Types[sel.X].Type) {
							t.Errorf("%s: assigns an email's Status; use email.Move", fset.Position(sel.Pos()))
						}
					}
				case *ast.CompositeLit:
					if !isEmail(info.Types[n].Type) {
						return true
					}
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if id, ok := kv.Key.(*ast.Ident); ok && (id.Name == "Status" || id.Name == "LatestStatus") {
								t.Errorf("%s: an email literal sets %s; use email.Create", fset.Position(kv.Pos()), id.Name)
							}
						}
					}
				}
				return true
			})
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d packages: the module was not found", checked)
	}
}
