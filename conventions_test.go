// Convention tests for the whole module (in the spirit of tailscale's
// pkgdoc_test and tstest/deptest): every package is documented once, and
// the layering between the internal packages holds.
package switchboard_test

import (
	"bytes"
	"encoding/json"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

const module = "github.com/switchboard-mcp/switchboard"

// pkg is the part of `go list -json` these tests use.
type pkg struct {
	Dir          string
	ImportPath   string
	Name         string
	Standard     bool
	Imports      []string // of the non-test files
	TestImports  []string // of the package's own _test.go files
	XTestImports []string // of its package x_test files
	Deps         []string // transitive, non-test
}

var listOnce struct {
	sync.Once
	pkgs []pkg
	err  error
	out  string
}

// list returns the module's packages as `go list -json ./...` reports them.
func list(t *testing.T) []pkg {
	t.Helper()
	listOnce.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			listOnce.err = err
			return
		}
		cmd := exec.Command(goCmd, "list", "-json", "./...")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			listOnce.err, listOnce.out = err, stderr.String()
			return
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p pkg
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				listOnce.err = err
				return
			}
			listOnce.pkgs = append(listOnce.pkgs, p)
		}
	})
	if listOnce.err != nil {
		if _, ok := listOnce.err.(*exec.Error); ok {
			t.Skipf("go command not available: %v", listOnce.err)
		}
		t.Fatalf("go list -json ./...: %v\n%s", listOnce.err, listOnce.out)
	}
	if len(listOnce.pkgs) == 0 {
		t.Fatal("go list -json ./... found no packages")
	}
	return listOnce.pkgs
}

// rel returns the module-relative import path ("internal/stdio").
func rel(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

func isInternal(path string) bool { return strings.HasPrefix(path, module+"/internal/") }

// isStd reports whether path is in the standard library (no dot in its
// first element, as go/build and the go command decide it).
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// TestPackageDocs: every package under cmd and internal has exactly one
// package doc comment, in one of its non-test files: "// Package name ..."
// for a library, "// Command name ..." for a main package.
func TestPackageDocs(t *testing.T) {
	var dirs []string
	for _, root := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			dirs = append(dirs, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	checked := 0
	for _, dir := range dirs {
		bp, err := build.ImportDir(dir, 0)
		if _, ok := err.(*build.NoGoError); ok {
			continue // a folder of folders, or of tests only
		} else if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		// Every non-test file, whatever its build constraints.
		files := slices.Concat(bp.GoFiles, bp.CgoFiles, bp.IgnoredGoFiles)
		var docs []string
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Error(err)
				continue
			}
			if f.Name.Name != bp.Name || f.Doc == nil {
				continue
			}
			docs = append(docs, name)
			text := f.Doc.Text()
			want := "Package " + bp.Name + " "
			if bp.Name == "main" {
				want = "Command " + filepath.Base(dir) + " "
			}
			if !strings.HasPrefix(text, want) {
				first, _, _ := strings.Cut(text, "\n")
				t.Errorf("%s/%s: package doc starts %q, want it to start %q", dir, name, first, want)
			}
		}
		checked++
		switch len(docs) {
		case 0:
			t.Errorf("%s: package %s has no package doc comment", dir, bp.Name)
		case 1:
		default:
			t.Errorf("%s: package %s has %d package doc comments (%s), want one", dir, bp.Name, len(docs), strings.Join(docs, ", "))
		}
	}
	if checked == 0 {
		t.Fatal("no packages found under cmd and internal")
	}
}

// observer reports the imports allowed to internal/metrics and
// internal/statusui: anything outside the module, internal/audit and
// internal/jsonrpc.
func observer(imp string) bool {
	return !isInternal(imp) || imp == module+"/internal/audit" || imp == module+"/internal/jsonrpc"
}

// TestImportRules encodes the layering of the internal packages. Imports
// are those of the non-test files unless a rule says otherwise.
func TestImportRules(t *testing.T) {
	pkgs := list(t)
	byPath := map[string]pkg{}
	for _, p := range pkgs {
		byPath[rel(p.ImportPath)] = p
	}
	for _, need := range []string{
		"cmd/switchboard", "internal/config", "internal/jsonrpc", "internal/stdio",
		"internal/audit", "internal/gateway", "internal/peers", "internal/sigv4",
	} {
		if _, ok := byPath[need]; !ok {
			t.Fatalf("package %s not found by go list; update the rules", need)
		}
	}

	// Leaf packages.
	for _, r := range []struct {
		pkg     string
		allowed func(imp string) bool
		what    string
	}{
		{"internal/config", func(imp string) bool { return !isInternal(imp) }, "no internal package"},
		{"internal/jsonrpc", isStd, "the standard library only"},
		// stdio clips child output for the log through audit.Clipped, so
		// that redaction happens before the cut.
		{"internal/stdio", func(imp string) bool { return isStd(imp) || imp == module+"/internal/audit" }, "the standard library and internal/audit only"},
		{"internal/audit", isStd, "the standard library only"},
		{"internal/buildinfo", isStd, "the standard library only"},
		{"internal/sigv4", func(imp string) bool { return !isInternal(imp) }, "no internal package"},
		// The metrics and the status page are fed audit records; what else
		// they show reaches them through functions the gateway hands in.
		{"internal/metrics", observer, "internal/audit and internal/jsonrpc only"},
		{"internal/statusui", observer, "internal/audit and internal/jsonrpc only"},
	} {
		for _, imp := range byPath[r.pkg].Imports {
			if !r.allowed(imp) {
				t.Errorf("%s imports %s; it may import %s", r.pkg, imp, r.what)
			}
		}
	}

	gateway := module + "/internal/gateway"
	for _, need := range []string{"internal/metrics", "internal/statusui"} {
		if _, ok := byPath[need]; !ok {
			t.Errorf("package %s not found by go list; update the rules", need)
		}
	}
	peers := module + "/internal/peers"
	for _, p := range pkgs {
		name := rel(p.ImportPath)
		// internal/gateway is the composition root: only the binary uses it.
		if slices.Contains(p.Imports, gateway) && name != "cmd/switchboard" {
			t.Errorf("%s imports internal/gateway; only cmd/switchboard may", name)
		}
		// internal/peers is test support: only _test.go files import it,
		// and nothing built into a binary depends on it.
		if slices.Contains(p.Imports, peers) {
			t.Errorf("%s imports internal/peers from a non-test file; only _test.go files may", name)
		}
		if p.Name == "main" && slices.Contains(p.Deps, peers) {
			t.Errorf("command %s depends on internal/peers", name)
		}
	}
}

// TestReadmeConfig checks that the YAML examples in README.md are valid
// configs: the first on its own, the aggregation one on top of it (with the
// destinations it names).
func TestReadmeConfig(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 2 {
		t.Fatalf("README.md has %d yaml blocks, want the config and the aggregation examples", len(blocks))
	}
	t.Setenv("REMOTE_TOKEN", "example-token")
	base := blocks[0][1]
	if _, err := config.Parse([]byte(base), "README.md"); err != nil {
		t.Errorf("README config example: %v", err)
	}
	agg := base + "  hass:\n    type: stdio\n    command: [hass-mcp]\n  wiki:\n    type: stdio\n    command: [wiki-mcp]\n" + blocks[1][1]
	if _, err := config.Parse([]byte(agg), "README.md"); err != nil {
		t.Errorf("README aggregation example: %v", err)
	}
}
