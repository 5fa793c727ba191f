package gateway_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
	"github.com/switchboard-mcp/switchboard/internal/router"
	"github.com/switchboard-mcp/switchboard/internal/sandbox"
)

// TestRouterLayout: every key of a namespace and a group reaches the
// router's own options (router.Layout), and the values the config and the
// router both name are the same strings.
func TestRouterLayout(t *testing.T) {
	cfg, err := config.Parse([]byte(`
destinations:
  a: {type: stdio, command: [x]}
  b: {type: stdio, command: [x]}
  c: {type: stdio, command: [x]}
namespaces:
  dev:
    servers: [a, b]
    tool_prefix: conflict
    tools: {allow: ["a__*"], deny: ["*delete*"]}
    prefix: {a: never, b: bee}
    overrides:
      a:
        echo: {name: say, title: Say, description: Says it back., annotations: {readOnlyHint: true}}
        secret: {hide: true}
    tool_search: true
  home:
    servers: [c]
    extends: dev
    isolated: true
    code_mode: only
    sandbox: {timeout: 2s, memory: 1048576, max_calls: 3, max_output: 4096, concurrency: 1}
groups:
  all: {namespaces: [dev, "!home"]}
`), filepath.Join(t.TempDir(), "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := gateway.RouterLayout(cfg)
	def := cfg.Namespaces["dev"].Sandbox // the defaults config fills
	want := &router.Layout{
		Names: []string{"a", "b", "c"},
		Namespaces: map[string]*router.Namespace{
			"dev": {Servers: []string{"a", "b"}, ToolPrefix: router.PrefixConflict,
				Tools: router.Filter{Allow: []string{"a__*"}, Deny: []string{"*delete*"}},
				Shape: router.Shaping{
					Prefixes: map[string]string{"a": router.PrefixNever, "b": "bee"},
					Overrides: map[string]map[string]*router.ToolOverride{"a": {
						"echo":   {Name: "say", Title: "Say", Description: "Says it back.", Annotations: map[string]any{"readOnlyHint": true}},
						"secret": {Hide: true},
					}},
				},
				ToolSearch: true,
				Sandbox: sandbox.Limits{Timeout: def.Timeout, Memory: def.Memory, MaxCalls: def.MaxCalls,
					MaxOutput: def.MaxOutput, Concurrency: def.Concurrency}},
			"home": {Servers: []string{"c"}, Extends: []string{"dev"}, Isolated: true, ToolPrefix: router.PrefixAlways,
				CodeMode: router.CodeModeOnly,
				Sandbox:  sandbox.Limits{Timeout: 2 * time.Second, Memory: 1 << 20, MaxCalls: 3, MaxOutput: 4096, Concurrency: 1}},
		},
		Groups: map[string]*router.Group{"all": {Namespaces: []string{"dev", "home"}, Forced: []string{"home"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RouterLayout =\n%#v\nwant\n%#v", got, want)
	}
	if def.Timeout == 0 {
		t.Error("config left the sandbox defaults out")
	}

	for _, c := range [][2]string{
		{config.ToolPrefixAlways, router.PrefixAlways}, {config.ToolPrefixConflict, router.PrefixConflict},
		{config.ToolPrefixNever, router.PrefixNever}, {config.CodeModeOff, router.CodeModeOff},
		{config.CodeModeOn, router.CodeModeOn}, {config.CodeModeOnly, router.CodeModeOnly},
	} {
		if c[0] != c[1] {
			t.Errorf("config %q and router %q name the same setting", c[0], c[1])
		}
	}
}
