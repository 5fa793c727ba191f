package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// flagDefs reads this package's source and returns, per FlagSet name
// (flag.NewFlagSet("relay", …)), the flags its function defines, those of
// the helpers it calls that take the FlagSet (addAWSFlags) included. It
// reads the source so that a flag added anywhere is found without being
// listed here by hand.
func flagDefs(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	type fn struct {
		set     string   // the FlagSet it makes, or ""
		flags   []string // flags it defines
		callees []string
	}
	fns := map[string]*fn{}
	defineArg := map[string]int{"String": 0, "Bool": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0,
		"Duration": 0, "Float64": 0, "Func": 0, "BoolFunc": 0, "Var": 1, "TextVar": 1,
		"StringVar": 1, "BoolVar": 1, "IntVar": 1, "DurationVar": 1}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || fd.Recv != nil {
				continue
			}
			cur := &fn{}
			fns[fd.Name.Name] = cur
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				lit := func(i int) string {
					if i >= len(call.Args) {
						return ""
					}
					if bl, ok := call.Args[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
						s, _ := strconv.Unquote(bl.Value)
						return s
					}
					return ""
				}
				switch fun := call.Fun.(type) {
				case *ast.SelectorExpr:
					if x, ok := fun.X.(*ast.Ident); ok && x.Name == "flag" && fun.Sel.Name == "NewFlagSet" {
						cur.set = lit(0)
					} else if i, ok := defineArg[fun.Sel.Name]; ok && lit(i) != "" {
						if id, ok := fun.X.(*ast.Ident); ok && id.Name != "flag" {
							cur.flags = append(cur.flags, lit(i))
						}
					}
				case *ast.Ident:
					cur.callees = append(cur.callees, fun.Name)
				}
				return true
			})
		}
	}
	var collect func(name string, seen map[string]bool) []string
	collect = func(name string, seen map[string]bool) []string {
		f := fns[name]
		if f == nil || seen[name] {
			return nil
		}
		seen[name] = true
		out := append([]string(nil), f.flags...)
		for _, c := range f.callees {
			if cf := fns[c]; cf != nil && cf.set == "" {
				out = append(out, collect(c, seen)...)
			}
		}
		return out
	}
	sets := map[string][]string{}
	for name, f := range fns {
		if f.set != "" {
			fl := collect(name, map[string]bool{})
			sort.Strings(fl)
			sets[f.set] = fl
		}
	}
	return sets
}

// Every flag of every command is named in that command's usage text
// (`switchboard CMD -h`) and in the top-level usage (`switchboard help`).
func TestUsageListsEveryFlag(t *testing.T) {
	sets := flagDefs(t)
	for _, want := range []string{"serve", "check", "relay", "agentcore", "health", "pin"} {
		if _, ok := sets[want]; !ok {
			t.Errorf("no FlagSet %q found in the source (found %v)", want, sets)
		}
	}
	for cmd, flags := range sets {
		_, stdout, stderr := runCmd(cmd, "-h")
		text := stdout + stderr
		if !strings.Contains(usage, "switchboard "+cmd) {
			t.Errorf("the top-level usage does not name the command %q", cmd)
		}
		for _, f := range flags {
			if !regexp.MustCompile(`--` + regexp.QuoteMeta(f) + `([^a-z0-9-]|$)`).MatchString(usage) {
				t.Errorf("the top-level usage does not list %s's --%s", cmd, f)
			}
		}
		for _, f := range flags {
			if !strings.Contains(text, "-"+f+" ") && !strings.Contains(text, "-"+f+"\n") &&
				!strings.Contains(text, "-"+f+"\t") && !strings.Contains(text, "-"+f+"]") {
				t.Errorf("switchboard %s -h does not list --%s:\n%s", cmd, f, text)
			}
		}
	}
}
