// Convention tests for the whole module (in the spirit of tailscale's
// pkgdoc_test and tstest/deptest): every package is documented once, the
// layering between the internal packages holds, and the binary links
// nothing on the forbidden list (gRPC among it).
package switchboard_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"maps"
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

// rel returns the module-relative import path ("internal/upstream/stdio").
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

// maxGatewayLines bounds internal/gateway, the composition root (its
// non-test .go files): it builds, reloads and serves; what runs a
// destination or answers a request lives elsewhere.
const maxGatewayLines = 2500

// TestGatewaySize: internal/gateway stays within maxGatewayLines.
func TestGatewaySize(t *testing.T) {
	files, err := filepath.Glob("internal/gateway/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("internal/gateway: %v, %d files", err, len(files))
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte("\n"))
	}
	if n > maxGatewayLines {
		t.Errorf("internal/gateway has %d lines of non-test Go, over %d: move what runs a destination or serves a request out of the composition root", n, maxGatewayLines)
	}
}

// maxPackageDocLines bounds a package doc comment: the package's contract.
const maxPackageDocLines = 25

// TestPackageDocs: every package under cmd and internal has exactly one
// package doc comment, in one of its non-test files: "// Package name ..."
// for a library, "// Command name ..." for a main package, of at most
// maxPackageDocLines lines.
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
			if n := fset.Position(f.Doc.End()).Line - fset.Position(f.Doc.Pos()).Line + 1; n > maxPackageDocLines {
				t.Errorf("%s/%s: package doc has %d lines, want at most %d: state the contract; detail goes on the types, measurements and history to docs/performance.md", dir, name, n, maxPackageDocLines)
			}
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

// Layers of the module's packages (see docs/architecture.md). Every
// package go list finds must be placed here: a new package is placed on
// purpose, and a package listed that does not exist (yet) is no error.
const (
	command = "command" // a main package
	root    = "root"    // composes fronts, core and clients: gateway, edge, relay
	front   = "front"   // how clients reach Switchboard: internal/front/...
	core    = "core"    // sessions, routing, eras, policy, destinations, the upstream core
	client  = "client"  // how Switchboard reaches servers: internal/upstream/...
	codec   = "codec"   // a protocol's wire format, shared by its front and its client
	support = "support" // vocabulary and services any layer may use
	tests   = "tests"   // test support: never in a binary
)

var layers = map[string]string{
	"":                                  tests, // the module root: these convention tests
	"deploy":                            tests,
	"scripts/otlpsink":                  command,
	"cmd/switchboard":                   command,
	"cmd/example-server":                command,
	"internal/gateway":                  root,
	"internal/edge":                     root, // the HTTP edge the gateway builds a Table for
	"internal/connlimit":                support,
	"internal/relay":                    root,
	"internal/front/streamable":         front,
	"internal/front/sse":                front,
	"internal/front/stdio":              front,
	"internal/front/agentruntime":       front,
	"internal/session":                  core,
	"internal/router":                   core,
	"internal/era":                      core,
	"internal/policy":                   core,
	"internal/destination":              core,
	"internal/upstream":                 core,
	"internal/upstream/stdio":           client,
	"internal/upstream/streamable":      client,
	"internal/upstream/sse":             client,
	"internal/upstream/agentcore":       client,
	"internal/upstream/oauth":           client,
	"internal/sse":                      codec,
	"internal/mcpheader":                codec,
	"internal/mcp":                      support,
	"internal/jsonrpc":                  support,
	"internal/audit":                    support,
	"internal/auth":                     support,
	"internal/backoff":                  support,
	"internal/buildinfo":                support,
	"internal/config":                   support,
	"internal/manifest":                 support,
	"internal/metrics":                  support,
	"internal/reqbody":                  support,
	"internal/bigbuf":                   support,
	"internal/sandbox":                  support,
	"internal/sigv4":                    support,
	"internal/statusui":                 support,
	"internal/tracing":                  support,
	"internal/cluster":                  support, // issue 24: what a cluster's replicas share
	"internal/cluster/eventlog":         support,
	"internal/cluster/hopauth":          support,
	"internal/cluster/ratelimit":        support,
	"internal/cluster/sessionstore":     support,
	"internal/cluster/replica":          support,
	"internal/sealed":                   support,
	"internal/guard":                    support, // issue 25: the guards' detectors and pins, wired in by the core
	"internal/guard/gate":               core,    // issue 25: the guards on a destination's request path
	"internal/cluster/clustertest":      tests,
	"internal/peertest":                 tests,
	"internal/upstream/oauth/oauthtest": tests,
}

// configImporters may import internal/config: the composition root and
// the command turn it into each component's options (plain structs of the
// component's own).
var configImporters = map[string]bool{
	"cmd/switchboard": true, "internal/gateway": true,
}

// layerViolations returns what breaks the layering if package name, with
// these transitive (non-test) dependencies, is in layer.
func layerViolations(name, layer string, deps []string) []string {
	var bad []string
	for _, dep := range deps {
		if !strings.HasPrefix(dep, module+"/") {
			continue
		}
		d := rel(dep)
		dl, ok := layers[d]
		if !ok {
			continue // reported once, for the package itself
		}
		switch {
		case layer == front && dl == client:
			bad = append(bad, "front depends on upstream client "+d)
		case layer == front && dl == front:
			bad = append(bad, "front depends on another front, "+d)
		case layer == client && dl == front:
			bad = append(bad, "upstream client depends on front "+d)
		case layer == core && dl == front:
			bad = append(bad, "core depends on front "+d)
		case layer == core && dl == client && name != "internal/destination":
			bad = append(bad, "core depends on upstream client "+d+" (only internal/destination dials)")
		case layer == codec && d != "internal/jsonrpc" && d != "internal/mcp":
			bad = append(bad, "codec depends on "+d+"; a codec may use the standard library, internal/jsonrpc and internal/mcp only")
		case layer == support && (dl == front || dl == client || dl == core || dl == root):
			bad = append(bad, "support package depends on "+dl+" package "+d)
		case layer != command && layer != root && layer != tests && dl == root:
			bad = append(bad, "depends on the composition root "+d)
		case layer != tests && dl == tests:
			bad = append(bad, "depends on test support "+d)
		}
	}
	return bad
}

// TestImportRules encodes the layering of the module. Every package has a
// layer; fronts and upstream clients never depend on each other (go list
// -deps of a front holds no upstream client, and the reverse), nor a front
// on another front; the core never depends on a front, nor, except
// internal/destination, on an upstream client; a codec holds the wire
// format only; support packages depend on no layer above them; only the
// binary imports internal/gateway; test support stays out of binaries; and
// a few leaves import what their rule lists only. Imports are those of the
// non-test files.
func TestImportRules(t *testing.T) {
	pkgs := list(t)
	byPath := map[string]pkg{}
	for _, p := range pkgs {
		byPath[rel(p.ImportPath)] = p
	}
	for _, need := range []string{
		"cmd/switchboard", "internal/config", "internal/jsonrpc", "internal/upstream/stdio",
		"internal/audit", "internal/gateway", "internal/peertest", "internal/sigv4", "internal/mcp",
		"internal/metrics", "internal/statusui", "internal/front/streamable", "internal/upstream/streamable",
	} {
		if _, ok := byPath[need]; !ok {
			t.Fatalf("package %s not found by go list; update the rules", need)
		}
	}

	// The rules bite: the gateway, which mounts the fronts and dials
	// through the clients, breaks them were it a front or a client.
	gw := byPath["internal/gateway"]
	if len(layerViolations("internal/gateway", front, gw.Deps)) == 0 || len(layerViolations("internal/gateway", client, gw.Deps)) == 0 {
		t.Error("layerViolations finds nothing wrong with the gateway as a front or a client")
	}

	counts := map[string]int{}
	for _, p := range pkgs {
		name := rel(p.ImportPath)
		layer, ok := layers[name]
		if !ok {
			t.Errorf("package %s has no layer; add it to layers in conventions_test.go", name)
			continue
		}
		counts[layer]++
		for _, v := range layerViolations(name, layer, p.Deps) {
			t.Errorf("%s (%s): %s", name, layer, v)
		}
		if slices.Contains(p.Imports, module+"/internal/config") && !configImporters[name] {
			t.Errorf("%s imports internal/config; only %v may (the gateway turns config into options)", name, slices.Sorted(maps.Keys(configImporters)))
		}
	}
	for _, layer := range []string{front, core, client, codec} {
		if counts[layer] < 2 {
			t.Errorf("%d packages in layer %s; want the layer populated (are the paths in layers out of date?)", counts[layer], layer)
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
		// The MCP vocabulary (versions, keys, Classify) is below every
		// package that speaks MCP.
		{"internal/mcp", func(imp string) bool { return isStd(imp) || imp == module+"/internal/jsonrpc" }, "the standard library and internal/jsonrpc only"},
		// stdio clips child output for the log through audit.Clipped, so
		// that redaction happens before the cut.
		{"internal/upstream/stdio", func(imp string) bool {
			return isStd(imp) || imp == module+"/internal/audit" || imp == module+"/internal/bigbuf" || imp == "golang.org/x/time/rate"
		}, "the standard library, golang.org/x/time/rate, internal/audit and internal/bigbuf only"},
		{"internal/bigbuf", isStd, "the standard library only"},
		{"internal/audit", isStd, "the standard library only"},
		{"internal/buildinfo", isStd, "the standard library only"},
		{"internal/backoff", isStd, "the standard library only"},
		{"internal/sigv4", func(imp string) bool { return !isInternal(imp) }, "no internal package"},
		// The upstream OAuth client is self-contained, so that it can move.
		{"internal/upstream/oauth", func(imp string) bool { return !isInternal(imp) }, "no internal package"},
		{"internal/upstream/oauth/oauthtest", func(imp string) bool { return !isInternal(imp) }, "no internal package"},
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
	for _, p := range pkgs {
		name := rel(p.ImportPath)
		// internal/gateway is the composition root: only the binary uses it.
		if slices.Contains(p.Imports, gateway) && name != "cmd/switchboard" {
			t.Errorf("%s imports internal/gateway; only cmd/switchboard may", name)
		}
		// internal/peertest and internal/cluster/clustertest are test
		// support: only _test.go files import them, and nothing built
		// into a binary depends on them.
		for _, support := range []string{"internal/peertest", "internal/cluster/clustertest"} {
			if slices.Contains(p.Imports, module+"/"+support) {
				t.Errorf("%s imports %s from a non-test file; only _test.go files may", name, support)
			}
			if p.Name == "main" && slices.Contains(p.Deps, module+"/"+support) {
				t.Errorf("command %s depends on %s", name, support)
			}
		}
	}
}

// TestReadmeConfig checks that the YAML examples of the docs are valid
// configs: the README's on its own, the aggregation example of
// docs/configuration.md on top of it (with the destinations it names).
func TestReadmeConfig(t *testing.T) {
	yamlBlocks := func(name string) []string {
		t.Helper()
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var blocks []string
		for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
			blocks = append(blocks, m[1])
		}
		return blocks
	}
	readme := yamlBlocks("README.md")
	if len(readme) != 1 {
		t.Fatalf("README.md has %d yaml blocks, want the one config example", len(readme))
	}
	t.Setenv("REMOTE_TOKEN", "example-token")
	base := readme[0]
	if _, err := config.Parse([]byte(base), "README.md"); err != nil {
		t.Errorf("README config example: %v", err)
	}
	var agg string
	for _, b := range yamlBlocks(filepath.Join("docs", "configuration.md")) {
		if strings.HasPrefix(b, "namespaces:") && strings.Contains(b, "groups:") {
			agg = b
		}
	}
	if agg == "" {
		t.Fatal("docs/configuration.md has no aggregation example (namespaces: and groups:)")
	}
	agg = base + "  hass:\n    type: stdio\n    command: [hass-mcp]\n  wiki:\n    type: stdio\n    command: [wiki-mcp]\n" + agg
	if _, err := config.Parse([]byte(agg), "docs/configuration.md"); err != nil {
		t.Errorf("docs/configuration.md aggregation example: %v", err)
	}
}

// maxReadmeLines bounds README.md: what Switchboard is, the two commands,
// a feature map into docs/, one config example and two tables; the rest is
// in docs/.
const maxReadmeLines = 300

// TestDocs: README.md stays within maxReadmeLines, and every relative link
// in README.md and docs/*.md names a file that exists and, with a
// #fragment, a heading in it (GitHub's anchors). The checker is shown to
// catch a missing file and a missing heading.
func TestDocs(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d: move the detail to docs/", n, maxReadmeLines)
	}
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md"}, files...)
	anchors := map[string]map[string]bool{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range brokenLinks(name, string(b), anchors) {
			t.Error(e)
		}
	}
	// The checker itself.
	bad := brokenLinks("docs/x.md", "# Here\n\n[a](nowhere.md) [b](../README.md#no-such-heading) [c](#here) `[d](nowhere.md)`\n", anchors)
	if len(bad) != 2 {
		t.Errorf("brokenLinks found %q in a doc with two broken links, want two", bad)
	}
}

var (
	mdLink       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdInlineCode = regexp.MustCompile("`[^`]*`")
	mdSlugDrop   = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// brokenLinks returns the relative links of the Markdown text of the file
// name that point at no file, or at no heading of it. anchors caches each
// file's heading anchors.
func brokenLinks(name, text string, anchors map[string]map[string]bool) []string {
	var errs []string
	for i, line := range strings.Split(stripFences(text), "\n") {
		for _, m := range mdLink.FindAllStringSubmatch(mdInlineCode.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := name
			if path != "" {
				file = filepath.Join(filepath.Dir(name), path)
				if _, err := os.Stat(file); err != nil {
					errs = append(errs, fmt.Sprintf("%s:%d: link %s: %s does not exist", name, i+1, target, file))
					continue
				}
			}
			if frag == "" {
				continue
			}
			if anchors[file] == nil {
				anchors[file] = headingAnchors(file, name, text)
			}
			if !anchors[file][frag] {
				errs = append(errs, fmt.Sprintf("%s:%d: link %s: %s has no heading #%s", name, i+1, target, file, frag))
			}
		}
	}
	return errs
}

// headingAnchors returns the anchors GitHub gives the headings of the
// Markdown file (text when file is self, the file being checked).
func headingAnchors(file, self, text string) map[string]bool {
	if file != self {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil
		}
		text = string(b)
	}
	set := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(stripFences(text), "\n") {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") || len(line)-len(h) > 6 {
			continue
		}
		slug := strings.ReplaceAll(mdSlugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			set[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			set[slug] = true
		}
		seen[slug]++
	}
	return set
}

// stripFences blanks the lines of fenced code blocks, keeping line numbers.
func stripFences(text string) string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
		} else if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// forbiddenDeps are what the switchboard binary must not depend on (in the
// spirit of tailscale's tstest/deptest): a package path, which forbids its
// subpackages too, and why.
var forbiddenDeps = map[string]string{
	"google.golang.org/grpc":                     "gRPC: traces go over OTLP/HTTP through internal/tracing's own exporter (the SDK's otlptracehttp links gRPC: +8.5 MB)",
	"github.com/grpc-ecosystem/grpc-gateway":     "comes with gRPC (the OTLP collector's generated service)",
	"go.opentelemetry.io/otel/exporters":         "the SDK's exporters: otlptracehttp and otlptracegrpc link gRPC; internal/tracing exports itself",
	"go.opentelemetry.io/proto/otlp":             "OTLP's generated types: internal/tracing encodes with protowire; only tests decode with them",
	"golang.org/x/net/http2":                     "a second HTTP/2 stack beside the one net/http bundles",
	"testing":                                    "test support in the binary",
	"net/http/httptest":                          "test support in the binary",
	module + "/internal/peertest":                "test support in the binary",
	module + "/internal/cluster/clustertest":     "test support in the binary",
	"github.com/chromedp/chromedp":               "the status page's browser test only",
	"github.com/modelcontextprotocol/go-sdk/mcp": "the go-sdk's client and server: tests' peers only (linked for one sentinel error it cost 1.4 MB of binary and 2.3 MiB of idle RSS)",
}

// forbidden returns the entry of forbiddenDeps that forbids dep and why,
// or "" and "".
func forbidden(dep string) (entry, why string) {
	for p, why := range forbiddenDeps {
		if dep == p || strings.HasPrefix(dep, p+"/") {
			return p, why
		}
	}
	return "", ""
}

// goListDeps is `go list -deps` of pkgs (and their tests with -test) for
// GOOS/GOARCH, as the release builds them (CGO_ENABLED=0, GOARM=7).
func goListDeps(t *testing.T, platform string, args ...string) []string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not available: %v", err)
	}
	goos, goarch, _ := strings.Cut(platform, "/")
	cmd := exec.Command(goCmd, append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, args...)...)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOARM=7")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s for %s: %v\n%s", strings.Join(args, " "), platform, err, stderr.String())
	}
	return strings.Fields(string(out))
}

// TestBinaryDeps: nothing in forbiddenDeps enters the dependencies of
// cmd/switchboard on any platform the release builds for. The check itself
// is shown to fail on internal/tracing's tests, which decode with OTLP's
// generated types and so link gRPC.
func TestBinaryDeps(t *testing.T) {
	for _, platform := range []string{"linux/amd64", "linux/arm64", "linux/arm", "darwin/arm64", "windows/amd64"} {
		for _, dep := range goListDeps(t, platform, "./cmd/switchboard") {
			if _, why := forbidden(dep); why != "" {
				t.Errorf("%s: cmd/switchboard depends on %s: %s", platform, dep, why)
			}
		}
	}
	found := map[string]bool{}
	for _, dep := range goListDeps(t, "linux/amd64", "-test", "./internal/tracing") {
		if entry, _ := forbidden(dep); entry != "" {
			found[entry] = true
		}
	}
	if !found["google.golang.org/grpc"] || !found["go.opentelemetry.io/proto/otlp"] || !found["testing"] {
		t.Errorf("the check found %v in internal/tracing's test dependencies, want gRPC, OTLP's generated types and testing", found)
	}
}
