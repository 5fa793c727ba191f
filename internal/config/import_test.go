package config

import (
	"slices"
	"testing"
	"time"
)

func TestImportClaudeDesktop(t *testing.T) {
	t.Parallel()
	c, err := testLoader(testEnv).load("testdata/claude_desktop.good.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"filesystem", "remote-sse", "remote-http", "windsurf", "gemini"}; !slices.Equal(c.Names, want) {
		t.Errorf("Names = %q, want %q (disabled servers left out)", c.Names, want)
	}
	fs := c.Destinations["filesystem"]
	if fs.Type != TypeStdio || !slices.Equal(fs.Command, []string{"npx"}) || len(fs.Args) != 3 || fs.Env["DEBUG"] != "1" || fs.Isolation != IsolationShared {
		t.Errorf("filesystem = %+v", fs)
	}
	for name, typ := range map[string]string{
		"remote-sse":  TypeSSE,            // no type, URL ends in /sse
		"remote-http": TypeStreamableHTTP, // no type
		"windsurf":    TypeStreamableHTTP, // type wins over the /sse suffix
		"gemini":      TypeStreamableHTTP, // httpUrl means Streamable HTTP
	} {
		if got := c.Destinations[name].Type; got != typ {
			t.Errorf("%s: Type = %q, want %q", name, got, typ)
		}
	}
	if got := c.Destinations["remote-sse"].Headers["Authorization"]; got != "Bearer api-token-value" {
		t.Errorf("remote-sse Authorization = %q", got)
	}
	if got := c.Destinations["remote-http"].Timeout; got != 90*time.Second {
		t.Errorf("remote-http Timeout = %v, want 90s", got)
	}
	if c.Listen != DefaultListen {
		t.Errorf("Listen = %q, want the default", c.Listen)
	}
}

func TestImportVSCode(t *testing.T) {
	t.Parallel()
	c, err := testLoader(testEnv).load("testdata/vscode.good.json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"memory": TypeStdio, "github": TypeStreamableHTTP, "events": TypeSSE}
	for name, typ := range want {
		if d := c.Destinations[name]; d == nil || d.Type != typ {
			t.Errorf("%s = %+v, want type %s", name, d, typ)
		}
	}
	if got := c.Destinations["github"].Headers["Authorization"]; got != "Bearer ghp_env_token_value" {
		t.Errorf("github Authorization = %q", got)
	}
}

func TestImportMCProxy(t *testing.T) {
	t.Parallel()
	c, err := testLoader(testEnv).load("testdata/mcproxy.good.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"sequential_thinking", "wikipedia", "home_assistant", "jesse"}; !slices.Equal(c.Names, want) {
		t.Errorf("Names = %q, want %q", c.Names, want)
	}
	if d := c.Destinations["jesse"]; d.Type != TypeStreamableHTTP || d.Timeout != 350*time.Second {
		t.Errorf("jesse = %+v", d)
	}
	if got := c.Destinations["home_assistant"].Env["HA_AGENT_KEY"]; got != "ha-agent-key-value" {
		t.Errorf("HA_AGENT_KEY = %q", got)
	}
	if got := c.Namespaces["docs"].Servers; !slices.Equal(got, []string{"wikipedia"}) {
		t.Errorf("docs servers = %q, want the disabled youtube left out", got)
	}
	if got := c.Namespaces["trading"]; !got.Isolated || !slices.Equal(got.Extends, []string{"docs"}) || got.ToolPrefix != ToolPrefixAlways {
		t.Errorf("trading = %+v", got)
	}
	g := c.Groups["everything"]
	if !slices.Equal(g.Namespaces, []string{"thinking", "docs", "trading", "home"}) || !slices.Equal(g.Forced, []string{"trading", "home"}) {
		t.Errorf("everything = %+v", g)
	}
	if !slices.Contains(c.SecretValues(), "ha-agent-key-value") {
		t.Errorf("SecretValues() misses an env value substituted into env")
	}
}

func TestStripJSONC(t *testing.T) {
	t.Parallel()
	in := "{\"a\": \"// not a comment\", // comment\n \"b\": [1, 2,], /* x\ny */ \"c\": \"\\\",}\",}"
	want := "{\"a\": \"// not a comment\",           \n \"b\": [1, 2 ],     \n     \"c\": \"\\\",}\" }"
	if got := string(stripJSONC([]byte(in))); got != want {
		t.Errorf("stripJSONC:\n got %q\nwant %q", got, want)
	}
}

func TestIsJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		`{"a": 1}`:                true,
		"\ufeff  \n{}":            true,
		"// c\n/* d */ {}":        true,
		"listen: x":               false,
		"# {\nlisten: x":          false,
		"/* unterminated {":       false,
		"// only a comment {":     false,
		"[1, 2]":                  false,
		"":                        false,
		"\n\n  {flow: mapping}\n": true, // parsed as JSON, fails as JSON
	} {
		if got := isJSON([]byte(in)); got != want {
			t.Errorf("isJSON(%q) = %v, want %v", in, got, want)
		}
	}
}
