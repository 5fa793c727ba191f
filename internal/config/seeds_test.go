package config

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMithrilFlatDestinations: mithril-proxy's `name: url` entries load as
// sse destinations whose endpoint is the URL plus /sse, as mithril-proxy
// used them.
func TestMithrilFlatDestinations(t *testing.T) {
	t.Parallel()
	c, err := testLoader(testEnv).load("testdata/mithril_flat.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"github":   {TypeStreamableHTTP, "https://api.githubcopilot.com/mcp"},
		"legacy":   {TypeSSE, "https://mcp.example.com/legacy/sse"},
		"already":  {TypeSSE, "https://mcp.example.com/tools/sse"},
		"query":    {TypeSSE, "https://mcp.example.com/base/sse?token=api-token-value"},
		"context7": {TypeStdio, ""},
	}
	for name, w := range want {
		d := c.Destinations[name]
		if d == nil || d.Type != w[0] || d.URL != w[1] {
			t.Errorf("%s = %+v, want type %s url %s", name, d, w[0], w[1])
		}
	}
	if !slices.Equal(c.Names, []string{"github", "legacy", "already", "query", "context7"}) {
		t.Errorf("Names = %v", c.Names)
	}
	if !slices.Contains(c.SecretValues(), "api-token-value") {
		t.Errorf("a ${VAR} substituted into a flat URL is not a secret value: %v", c.SecretValues())
	}
	if d := c.Destinations["legacy"]; !d.LegacySSE || d.Isolation != "" {
		t.Errorf("flat destination defaults: %+v", d)
	}
}

func TestMithrilTopLevelFlat(t *testing.T) {
	t.Parallel()
	c, err := testLoader(testEnv).load("testdata/mithril_toplevel.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Destinations) != 2 || c.Destinations["wiki"].URL != "https://wiki.example.com/mcp/sse" ||
		c.Destinations["notes"].URL != "http://127.0.0.1:9000/sse" || c.Destinations["notes"].Type != TypeSSE {
		t.Errorf("destinations = %v", slices.Sorted(maps.Keys(c.Destinations)))
		for n, d := range c.Destinations {
			t.Logf("%s: %+v", n, d)
		}
	}
	// Anything else at the top level is the native schema, strictly.
	for _, bad := range []string{
		"wiki: https://wiki.example.com/mcp\nlisten: 127.0.0.1:1\n",
		"wiki: https://wiki.example.com/mcp\nnotes: ftp://x/\n",
	} {
		if _, err := testLoader(testEnv).parse([]byte(bad), "destinations.yml"); err == nil || !strings.Contains(err.Error(), `unknown key "wiki"`) {
			t.Errorf("%q: %v, want unknown key \"wiki\"", bad, err)
		}
	}
	// A flat entry whose value is not a URL is reported, not mistaken.
	_, err = testLoader(testEnv).parse([]byte("destinations:\n  wiki: wiki.example.com\n"), "d.yml")
	if err == nil || !strings.Contains(err.Error(), "d.yml:2: destinations.wiki: url must start with http:// or https://") {
		t.Errorf("flat entry without a scheme: %v", err)
	}
}

// TestMithrilEnv: SECRETS_CONFIG, LOG_FILE and STDIO_RESPONSE_TIMEOUT_SECS
// override the file; bad values are errors naming the variable.
func TestMithrilEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secrets := filepath.Join(dir, "elsewhere.yml")
	if err := os.WriteFile(secrets, []byte("context7:\n  CONTEXT7_API_KEY: from-env-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := "log: {file: file.log}\ntimeout: 5s\ndestinations:\n  context7: {type: stdio, command: [npx, server]}\n"

	c, err := testLoader(map[string]string{}).parse([]byte(file), filepath.Join(dir, "switchboard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 5*time.Second || c.Log.File != filepath.Join(dir, "file.log") || c.SecretsFile != "" {
		t.Fatalf("without env: timeout %v log %q secrets %q", c.Timeout, c.Log.File, c.SecretsFile)
	}

	env := map[string]string{"SECRETS_CONFIG": secrets, "LOG_FILE": "rel/proxy.log", "STDIO_RESPONSE_TIMEOUT_SECS": "2.5"}
	c, err = testLoader(env).parse([]byte(file), filepath.Join(dir, "switchboard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if c.Timeout != 2500*time.Millisecond {
		t.Errorf("timeout %v, want 2.5s from STDIO_RESPONSE_TIMEOUT_SECS", c.Timeout)
	}
	if c.Log.File != filepath.Join(wd, "rel/proxy.log") {
		t.Errorf("log file %q, want LOG_FILE resolved against the working directory", c.Log.File)
	}
	if c.SecretsFile != secrets || c.Destinations["context7"].Secrets["CONTEXT7_API_KEY"] != "from-env-file" {
		t.Errorf("secrets file %q, secrets %v: want SECRETS_CONFIG's", c.SecretsFile, c.Destinations["context7"].Secrets)
	}

	// SECRETS_CONFIG wins over secrets_file too.
	c, err = testLoader(map[string]string{"SECRETS_CONFIG": secrets}).parse([]byte("secrets_file: nope.yml\n"+file), filepath.Join(dir, "switchboard.yaml"))
	if err != nil || c.SecretsFile != secrets {
		t.Errorf("SECRETS_CONFIG over secrets_file: %v %v", c, err)
	}

	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STDIO_RESPONSE_TIMEOUT_SECS": "soon"}, `STDIO_RESPONSE_TIMEOUT_SECS: invalid value "soon": want a number of seconds`},
		{map[string]string{"STDIO_RESPONSE_TIMEOUT_SECS": "-1"}, `STDIO_RESPONSE_TIMEOUT_SECS: invalid value "-1"`},
		{map[string]string{"STDIO_RESPONSE_TIMEOUT_SECS": "NaN"}, `STDIO_RESPONSE_TIMEOUT_SECS: invalid value "NaN"`},
		{map[string]string{"SECRETS_CONFIG": filepath.Join(dir, "missing.yml")}, `SECRETS_CONFIG: open ` + filepath.Join(dir, "missing.yml") + `: no such file or directory`},
	} {
		_, err := testLoader(tt.env).parse([]byte(file), filepath.Join(dir, "switchboard.yaml"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("env %v: %v, want %q", tt.env, err, tt.want)
		}
	}
	c, err = testLoader(map[string]string{"STDIO_RESPONSE_TIMEOUT_SECS": "0"}).parse([]byte(file), filepath.Join(dir, "switchboard.yaml"))
	if err != nil || c.Timeout != 0 {
		t.Errorf("STDIO_RESPONSE_TIMEOUT_SECS=0: %v, timeout %v, want 0 (disabled)", err, c.Timeout)
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"testdata/minimal.good.yaml":        FormatNative,
		"testdata/mithril_flat.good.yaml":   FormatNative,
		"testdata/native.good.json":         FormatNative,
		"testdata/claude_desktop.good.json": FormatClient,
		"testdata/vscode.good.json":         FormatClient,
		"testdata/mcproxy.good.json":        FormatMCProxy,
	} {
		c, err := testLoader(testEnv).load(file)
		if err != nil {
			t.Fatal(err)
		}
		if c.Format != want {
			t.Errorf("%s: Format %q, want %q", file, c.Format, want)
		}
	}
}

// TestShellCharsInLists: list forms reach the Config exactly as written.
func TestShellCharsInLists(t *testing.T) {
	t.Parallel()
	c, err := testLoader(testEnv).load("testdata/claude_desktop_shell_chars.good.json")
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Destinations["remote"]; !slices.Equal(d.Args, []string{"-y", "mcp-remote", "https://mcp.example.com/sse?team=a&env=prod", "--header", "X-Route: a|b"}) {
		t.Errorf("remote args %q", d.Args)
	}
	if d := c.Destinations["piped"]; !slices.Equal(append(d.Command, d.Args...), []string{"sh", "-c", "npx -y server 2>&1 | tee -a /tmp/server.log"}) {
		t.Errorf("piped argv %q %q", d.Command, d.Args)
	}
	if d := c.Destinations["archive"]; !slices.Equal(d.Command, []string{"/opt/mcp (2024)/bin/server"}) {
		t.Errorf("archive command %q", d.Command)
	}
	c, err = testLoader(testEnv).load("testdata/shell_chars_lists.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Destinations["split"]; !slices.Equal(d.Command, []string{"npx", "-y", "mcp-remote", "https://mcp.example.com/sse?team=a&env=prod", "--root", "/data(2024)", "/opt/tools/bin"}) {
		t.Errorf("split command %q", d.Command)
	}
	if d := c.Destinations["archive"]; !slices.Equal(d.Args, []string{"--match", "a|b", "--sep=;", "$(not a substitution)", "line1\nline2"}) {
		t.Errorf("archive args %q", d.Args)
	}
}
