package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testEnv is the environment the tests load configurations with; no test
// reads or changes the real one.
var testEnv = map[string]string{
	"GITHUB_TOKEN": "ghp_env_token_value",
	"LEGACY_KEY":   "legacy-env-key",
	"TOOLS":        "/opt/tools",
	"API_TOKEN":    "api-token-value",
	"HA_AGENT_KEY": "ha-agent-key-value",
}

// testLoader returns a loader reading real files and the given environment.
func testLoader(env map[string]string) loader {
	return loader{
		lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		readFile:  os.ReadFile,
	}
}

var expectedErrors = []struct {
	filename string
	errMsg   string
}{
	{"unknown_key.bad.yaml", `testdata/unknown_key.bad.yaml:4: destinations.github: unknown key "urll" (did you mean url?)`},
	{"unknown_top_key.bad.yaml", `testdata/unknown_top_key.bad.yaml:1: unknown key "listn" (did you mean listen?)`},
	{"wrong_type_int.bad.yaml", `:1: max_sessions: expected an integer, got a string`},
	{"wrong_type_mapping.bad.yaml", `:1: destinations: expected a mapping, got a list`},
	{"wrong_type_list.bad.yaml", `:5: destinations.github.forward_headers: expected a list, got a string`},
	{"connections_get_streams.bad.yaml", `:2: connections.get_streams: must be positive`},
	{"connections_max.bad.yaml", `:2: connections.max: must be -1 (no bound), 0 (the default) or positive`},
	{"connections_read_header_timeout.bad.yaml", `:2: connections.read_header_timeout: must be positive`},
	{"connections_reserved.bad.yaml", `:2: connections.reserved: must not be negative`},
	{"connections_body_timeout.bad.yaml", `:2: connections.body_timeout: must not be negative`},
	{"wrong_type_bool.bad.yaml", `destinations.github.legacy_sse: expected a boolean, got a string`},
	{"duplicate_key.bad.yaml", `:5: destinations: duplicate key "github" (first defined at line 2)`},
	{"duration_unit.bad.yaml", `:1: timeout: invalid duration 30: missing unit`},
	{"duration_syntax.bad.yaml", `session_idle_timeout: invalid duration "half an hour"`},
	{"size.bad.yaml", `max_body_bytes: invalid size "16 megabytes"`},
	{"syntax.bad.yaml", `testdata/syntax.bad.yaml:2: did not find expected node content`},
	{"multi_doc.bad.yaml", `:2: multiple YAML documents`},
	{"unset_var.bad.yaml", `:6: destinations.github.headers.Authorization: ${SWITCHBOARD_UNSET_TOKEN} is not set`},
	{"isolation_typo.bad.yaml", `:5: destinations.files: unknown key "isolaton" (did you mean isolation?)`},
	{"unset_var_once.bad.yaml", `:6: destinations.ops.headers.Authorization: ${SWITCHBOARD_UNSET_OPS_TOKEN} is not set (also used at line 11)`},
	{"bad_reference.bad.yaml", `invalid reference ${input:token}`},
	{"unterminated_reference.bad.yaml", `:4: destinations.github.url: unterminated "${"`},
	{"command_quotes.bad.yaml", `:4: destinations.files.command: quotes are not supported in a command written as one string (no shell parses it); write it as command: [node, "my server.js"]`},
	{"type_missing.bad.yaml", `:2: destinations.github: type is required: stdio, streamable_http, sse or agentcore; for an sse server at url plus /sse, write the destination as just its URL (name: https://host/base)`},
	{"type_unknown.bad.yaml", `:3: destinations.github: unknown type "websocket"`},
	{"stdio_no_command.bad.yaml", `destinations.context7: command is required for type stdio`},
	{"shell_meta.bad.yaml", `:4: destinations.foo.command: ";" needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: command: [sh, -c, "npx -y server; rm -rf /"]`},
	{"shell_subst.bad.yaml", `destinations.foo.command: "$(" needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: command: [sh, -c, "node server.js --user=$(whoami)"]`},
	{"shell_newline.bad.yaml", `destinations.foo.command: a line break needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: command: [sh, -c, "npx -y server\nrm -rf /"]`},
	{"shell_pipe.bad.yaml", `:4: destinations.foo.command: "|" needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: command: [sh, -c, "npx -y server | tee /tmp/server.log"]`},
	{"shell_and.bad.yaml", `destinations.foo.command: "&&" needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: command: [sh, -c, "cd /srv/mcp && node server.js"]`},
	{"shell_redirect.bad.yaml", `destinations.foo.command: ">" needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: command: [sh, -c, "node server.js 2>/dev/null"]`},
	{"shell_background.bad.yaml", `destinations.foo.command: "&" needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: command: [sh, -c, "node server.js &"]`},
	{"shell_backtick.bad.yaml", "destinations.foo.command: \"`\" needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: command: [sh, -c, \"node `which server`\"]"},
	{"shell_variable.bad.yaml", `:4: destinations.foo.command: $HOME is expanded only by a shell, and Switchboard never runs one; write ${HOME} (Switchboard expands ${NAME} itself)`},
	{"shell_tilde.bad.yaml", `destinations.foo.command: "~" is expanded only by a shell, and Switchboard never runs one; write ${HOME}`},
	{"command_unclosed_quote.bad.yaml", `destinations.foo.command: unclosed " quote; write the program and its arguments as a list instead`},
	{"args_nul.bad.yaml", `:5: destinations.foo: args[1] contains a NUL byte, which no program argument can hold`},
	{"url_missing.bad.yaml", `destinations.github: url is required for type streamable_http`},
	{"url_invalid.bad.yaml", `:4: destinations.github: invalid url: missing ']' in host`},
	{"url_scheme.bad.yaml", `destinations.github: url must start with http:// or https://`},
	{"url_no_host.bad.yaml", `destinations.github: url has no host`},
	{"url_on_stdio.bad.yaml", `:5: destinations.context7: url is not valid for type stdio`},
	{"headers_on_stdio.bad.yaml", `destinations.context7: headers is not valid for type stdio`},
	{"command_on_http.bad.yaml", `:5: destinations.legacy: command is not valid for type sse`},
	{"cwd_on_http.bad.yaml", `destinations.legacy: cwd is not valid for type streamable_http`},
	{"protocol.bad.yaml", `destinations.everything: unknown protocol "2026": want auto, legacy or modern`},
	{"protocol_modern_sse.bad.yaml", `destinations.old: protocol modern is not valid for type sse`},
	{"isolation.bad.yaml", `destinations.context7: unknown isolation "per-client": want shared or session`},
	{"isolation_on_http.bad.yaml", `destinations.github: isolation is not valid for type streamable_http`},
	{"agentcore_no_arn.bad.yaml", `:2: destinations.runtime: arn is required for type agentcore`},
	{"agentcore_arn.bad.yaml", `:4: destinations.runtime: arn "arn:aws:lambda:us-west-2:123456789012:function/f" is not an AgentCore runtime ARN`},
	{"agentcore_session_mode.bad.yaml", `:5: destinations.runtime: unknown session_mode "sticky": want session, identity or request`},
	{"agentcore_qualifier.bad.yaml", `:5: destinations.runtime: qualifier "a/b"`},
	{"agentcore_url.bad.yaml", `:5: destinations.runtime: url is not valid for type agentcore`},
	{"arn_on_http.bad.yaml", `:5: destinations.github: arn is not valid for type streamable_http`},
	{"upstream_oauth_on_stdio.bad.yaml", `:5: destinations.local: oauth is not valid for type stdio`},
	{"upstream_oauth_grant.bad.yaml", `:6: destinations.remote: oauth.grant: want authorization_code or client_credentials`},
	{"upstream_oauth_token_store.bad.yaml", `:6: destinations.remote: oauth.token_store: want file or keyring`},
	{"upstream_oauth_client_credentials.bad.yaml", `:6: destinations.remote: oauth: grant client_credentials needs client_id and client_secret`},
	{"upstream_oauth_secret_no_id.bad.yaml", `:6: destinations.remote: oauth.client_secret needs oauth.client_id`},
	{"upstream_oauth_metadata_url.bad.yaml", `:6: destinations.remote: oauth.client_metadata_url: want an https URL with a path`},
	{"upstream_oauth_redirect_url.bad.yaml", `:6: destinations.remote: oauth.redirect_url: want http on a loopback address`},
	{"upstream_oauth_callback_url.bad.yaml", `:6: destinations.remote: oauth.callback_url: want this gateway's URL of /oauth/callback/remote`},
	{"upstream_oauth_callback_grant.bad.yaml", `:9: destinations.remote: oauth.callback_url is for grant authorization_code`},
	{"upstream_oauth_with_aws.bad.yaml", `destinations.remote: oauth and aws both authorize with the Authorization header: give one`},
	{"upstream_oauth_authorization_header.bad.yaml", `destinations.remote: oauth sets the Authorization header: remove it from headers`},
	{"upstream_oauth_forward_authorization.bad.yaml", `destinations.remote: oauth sets the Authorization header: the client's is never passed on`},
	{"upstream_oauth_key_grant.bad.yaml", `:6: destinations.remote: oauth.client_key_file is for grant client_credentials`},
	{"upstream_oauth_unknown_key.bad.yaml", `:6: destinations.remote.oauth: unknown key "scope"`},
	{"aws_on_stdio.bad.yaml", `:5: destinations.files: aws is not valid for type stdio`},
	{"aws_role_arn.bad.yaml", `:6: destinations.billing: aws.assume_role_arn "arn:aws:iam::123456789012:user/alice" is not an IAM role ARN: want arn:aws:iam::ACCOUNT:role/NAME`},
	{"aws_role_session.bad.yaml", `:7: destinations.billing: aws.role_session_name "switch board": want 2 to 64 letters, digits or +=,.@_-`},
	{"aws_role_session_no_role.bad.yaml", `:6: destinations.billing: aws.role_session_name needs aws.assume_role_arn`},
	{"aws_region.bad.yaml", `:6: destinations.billing: aws.region "us_east_1": want a region name like us-east-1`},
	{"aws_service_empty.bad.yaml", `:6: destinations.billing.aws.service: empty; leave the key out to infer the service from the host`},
	{"aws_service.bad.yaml", `:6: destinations.billing: aws.service "Billing MCP": want a signing name like billing-mcp`},
	{"aws_service_agentcore.bad.yaml", `:6: destinations.runtime: aws.service is not valid for type agentcore (it always signs as bedrock-agentcore)`},
	{"aws_region_agentcore.bad.yaml", `:6: destinations.runtime: aws.region "us-east-1" is not the region of the arn (us-west-2); leave it out`},
	{"aws_unknown_key.bad.yaml", `:6: destinations.billing.aws: unknown key "role_arn"`},
	{"aws_profile.bad.yaml", `:6: destinations.billing: aws.profile contains a control character`},
	{"aws_not_mapping.bad.yaml", `:5: destinations.billing.aws: expected a mapping, got a string`},
	{"aws_unset_var.bad.yaml", `:6: destinations.billing.aws.assume_role_arn: ${SWITCHBOARD_UNSET_ROLE} is not set`},
	{"name_invalid.bad.yaml", `:2: destinations.git hub: invalid name`},
	{"name_too_long.bad.yaml", `invalid name: want 1 to 64 letters`},
	{"name_reserved.bad.yaml", `destinations.metrics: name "metrics" is reserved`},
	{"negative_timeout.bad.yaml", `:1: timeout: must not be negative`},
	{"metrics_tool_labels_negative.bad.yaml", `:2: metrics.tool_labels: must not be negative`},
	{"metrics_tool_labels_large.bad.yaml", `:3: metrics.tool_labels: 5000 is more than 1000`},
	{"metrics_enabled.bad.yaml", `:2: metrics.enabled:`},
	{"metrics_unknown_key.bad.yaml", `:2: metrics: unknown key "path"`},
	{"tracing_unknown_key.bad.yaml", `:3: tracing: unknown key "protocol"`},
	{"tracing_sample_ratio.bad.yaml", `:3: tracing.sample_ratio: 1.5 is not between 0 and 1`},
	{"tracing_sample_ratio_type.bad.yaml", `:2: tracing.sample_ratio: expected a number, got a string`},
	{"tracing_endpoint.bad.yaml", `:2: tracing.endpoint: "127.0.0.1:4318" is not an http(s) URL`},
	{"tracing_service_name.bad.yaml", `:3: tracing.service_name: must not be empty`},
	{"tracing_enabled.bad.yaml", `:2: tracing.enabled:`},
	{"ui_unknown_key.bad.yaml", `:3: ui: unknown key "theme"`},
	{"negative_dest_timeout.bad.yaml", `:5: destinations.github: timeout must not be negative`},
	{"negative_keep_alive.bad.yaml", `keep_alive: must not be negative`},
	{"negative_child_idle.bad.yaml", `session_child_idle_timeout: must not be negative`},
	{"negative_orphan.bad.yaml", `session_orphan_timeout: must not be negative`},
	{"negative_max_children.bad.yaml", `max_children: must not be negative (0 means max_sessions)`},
	{"restart_retry_zero.bad.yaml", `restart.retry_after: must be positive`},
	{"size_zero.bad.yaml", `max_body_bytes: must be positive`},
	{"negative_message_size.bad.yaml", `max_message_bytes: must be positive`},
	{"max_sessions_zero.bad.yaml", `max_sessions: must be positive`},
	{"restart_negative_delay.bad.yaml", `:2: restart.delays[1]: must not be negative`},
	{"restart_negative_attempts.bad.yaml", `restart.max_attempts: must not be negative`},
	{"restart_unknown_key.bad.yaml", `:2: restart: unknown key "delay"`},
	{"log_level.bad.yaml", `log.level: unknown level "verbose"`},
	{"listen.bad.yaml", `listen: invalid address "localhost": want host:port`},
	{"listen_port.bad.yaml", `listen: invalid port "99999"`},
	{"origin.bad.yaml", `allowed_origins[0]: invalid origin "app.example.com"`},
	{"allowed_host.bad.yaml", `allowed_hosts[0]: invalid host "gateway.internal:8080"`},
	{"env_name.bad.yaml", `destinations.context7: env: invalid name "API-KEY"`},
	{"forward_header.bad.yaml", `destinations.github: forward_headers: invalid header name "X Request Id"`},
	{"header_name.bad.yaml", `destinations.github: headers: invalid header name "Bad Header"`},
	{"header_dup.bad.yaml", `destinations.github.headers: keys "authorization" and "Authorization" are the same`},
	{"ns_unknown_server.bad.yaml", `:7: namespaces.dev: unknown destination "gitlab" in servers`},
	{"ns_unknown_extends.bad.yaml", `namespaces.dev: unknown namespace "base" in extends`},
	{"ns_cycle.bad.yaml", `namespaces.c: extends cycle: a -> b -> c -> a`},
	{"ns_self_cycle.bad.yaml", `namespaces.a: extends cycle: a -> a`},
	{"ns_tool_prefix.bad.yaml", `namespaces.dev: unknown tool_prefix "sometimes": want always, conflict or never`},
	{"ns_glob.bad.yaml", `namespaces.dev: tools.deny: invalid pattern "github__[delete": syntax error in pattern`},
	{"ns_name.bad.yaml", `namespaces.dev.tools: invalid name`},
	{"ns_unknown_key.bad.yaml", `namespaces.dev: unknown key "server"`},
	{"ns_prefix_server.bad.yaml", `:6: namespaces.dev: prefix: "gitlab" is not a server of the namespace`},
	{"ns_prefix_value.bad.yaml", `namespaces.dev: prefix.github: "git hub" is neither always, conflict, never nor a custom prefix`},
	{"ns_override_server.bad.yaml", `namespaces.dev: overrides: "gitlab" is not a server of the namespace`},
	{"ns_override_name.bad.yaml", `:8: namespaces.dev: overrides.github.search.name: "find repos" is not a valid tool name`},
	{"ns_override_dup.bad.yaml", `namespaces.dev: overrides.github.search.name: "find" is also the name of github.issues`},
	{"ns_override_annotation.bad.yaml", `namespaces.dev: overrides.github.search.annotations.readOnlyHint: expected a boolean, got yes please`},
	{"ns_override_unknown_key.bad.yaml", `namespaces.dev.overrides.github.search: unknown key "rename"`},
	{"ns_code_mode.bad.yaml", `namespaces.dev.code_mode: expected true, false or only, got a string`},
	{"ns_sandbox_off.bad.yaml", `namespaces.dev: sandbox is set but code_mode is off`},
	{"ns_sandbox_memory.bad.yaml", `namespaces.dev: sandbox.memory must be at least 1MiB`},
	{"ns_sandbox_timeout.bad.yaml", `namespaces.dev: sandbox.timeout (20s) must be shorter than timeout (15s)`},
	{"ns_sandbox_unknown_key.bad.yaml", `namespaces.dev.sandbox: unknown key "cpu"`},
	{"group_unknown_ns.bad.yaml", `groups.all: unknown namespace "home"`},
	{"group_isolated.bad.yaml", `groups.all: namespace "home" is isolated; write "!home" to include it anyway`},
	{"group_is_namespace.bad.yaml", `groups.dev: name "dev" is also a namespace`},
	{"ns_is_destination.bad.yaml", `:6: namespaces.github: name "github" is also a destination: both would be served at /github/mcp; rename one`},
	{"group_is_destination.bad.yaml", `groups.github: name "github" is also a destination: both would be served at /github/mcp`},
	{"group_empty.bad.yaml", `groups.all: namespaces is empty`},
	{"group_name_reserved.bad.yaml", `groups.sse: name "sse" is reserved`},
	{"secrets_unknown_dest.bad.yaml", `testdata/secrets/unknown_dest.secrets.yml:3: unknown destination "context8"`},
	{"secrets_missing.bad.yaml", `:1: secrets_file: open testdata/secrets/does-not-exist.yml: no such file or directory`},
	{"secrets_not_string.bad.yaml", `not_string.secrets.yml:2: context7.PIN: expected a string, got an integer (quote the value)`},
	{"secrets_bad_name.bad.yaml", `bad_name.secrets.yml:2: context7: invalid name "api-key"`},
	{"secrets_syntax.bad.yaml", `syntax.secrets.yml:`},
	{"merge_not_mapping.bad.yaml", `destinations.a: merge (<<) values must be mappings, got an integer`},
	{"import_unknown_key.bad.json", `testdata/import_unknown_key.bad.json:4: mcpServers.filesystem: unknown key "comand"`},
	{"import_envfile.bad.json", `:3: servers.memory.envFile: not supported`},
	{"import_type.bad.json", `:3: mcpServers.remote: unknown type "websocket"`},
	{"import_empty_server.bad.json", `mcpServers.nothing: needs a command or a url`},
	{"import_no_name.bad.json", `:3: servers[0]: a server in a list needs a "name" string`},
	{"import_shell.bad.json", `:3: mcpServers.bad.command: "|" needs a shell, and Switchboard never runs one (it runs a program with a list of arguments); write the program and its arguments as a list, or to run a shell on purpose: "command": "sh", "args": ["-c", "npx server | tee log"]`},
	{"import_command_line.bad.json", `:3: mcpServers.remote.command: "npx -y mcp-remote" is one program name, not a command line (it is not split on spaces); write "command": "npx", "args": ["-y", "mcp-remote", "https://mcp.example.com/sse?team=a&env=prod"]`},
	{"import_command_quotes.bad.json", `:3: mcpServers.files.command: quotes are not supported in a command written as one string (no shell parses it); write it as "command": "node", "args": ["/opt/my server/index.js", "--root", "/data"]`},
	{"import_env_on_http.bad.json", `servers[0]: env is not valid for type streamable_http`},
	{"json_syntax.bad.json", `json_syntax.bad.json:4: invalid JSON: invalid character '"' after object key:value pair`},
	{"json_trailing.bad.json", `:1: invalid JSON: data after the top-level value`},
}

func TestBadConfigs(t *testing.T) {
	t.Parallel()
	l := testLoader(testEnv)
	for _, ee := range expectedErrors {
		t.Run(ee.filename, func(t *testing.T) {
			t.Parallel()
			c, err := l.load(filepath.Join("testdata", ee.filename))
			if err == nil {
				t.Fatalf("loaded without error: %+v", c)
			}
			if c != nil {
				t.Errorf("got a Config along with the error")
			}
			if !strings.Contains(err.Error(), ee.errMsg) {
				t.Errorf("error does not contain %q:\n%v", ee.errMsg, err)
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Errorf("error is %T, want Errors", err)
			}
		})
	}
}

// TestBadConfigsCovered checks that every *.bad.* file has a row.
func TestBadConfigsCovered(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.bad.*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.ContainsFunc(expectedErrors, func(ee struct{ filename, errMsg string }) bool {
			return ee.filename == filepath.Base(f)
		}) {
			t.Errorf("%s has no row in expectedErrors", f)
		}
	}
}

func TestGoodConfigs(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.good.*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no good configs")
	}
	for _, f := range files {
		if _, err := testLoader(testEnv).load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestFullConfig(t *testing.T) {
	t.Parallel()
	c, err := testLoader(testEnv).load("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Listen:                  "0.0.0.0:9090",
		SecretsFile:             filepath.Join("testdata", "secrets", "full.secrets.yml"),
		Timeout:                 45 * time.Second,
		SessionIdleTimeout:      time.Hour,
		SessionChildIdleTimeout: 2 * time.Minute,
		SessionOrphanTimeout:    time.Minute,
		MaxChildren:             6,
		MaxBodyBytes:            8 << 20,
		MaxMessageBytes:         4194304,
		MaxSessions:             20,
		KeepAlive:               20 * time.Second,
		AllowedOrigins:          []string{"https://app.example.com", "http://localhost:5173"},
		AllowedHosts:            []string{"gateway.internal", "[::1]"},
		Restart:                 Restart{Delays: []time.Duration{250 * time.Millisecond, time.Second}, MaxAttempts: 5, RetryAfter: 5 * time.Second, RetryMax: time.Minute},
		Audit:                   Audit{Path: filepath.Join("testdata", "audit.jsonl"), LogBodies: true},
		Log:                     Log{Level: "debug", File: "/var/log/switchboard.log"},
		Metrics:                 Metrics{Enabled: true, ToolLabels: 50},
		UI:                      UI{Enabled: false},
		Tracing:                 Tracing{Enabled: true, Endpoint: "http://127.0.0.1:4318", SampleRatio: 0.5, ServiceName: "switchboard-test"},
		Connections:             Connections{Reserved: 4, PerAddress: 64, PerClient: -1, GetStreams: 2, ReadHeaderTimeout: 5 * time.Second, BodyTimeout: 30 * time.Second},
		Auth:                    fullAuth,
		Clients:                 fullClients,
		ClientOrder:             []string{"ci", "people"},
		Limits:                  fullLimits,
		TLS:                     &TLS{Cert: filepath.Join("testdata", "tls", "cert.pem"), Key: filepath.Join("testdata", "tls", "key.pem"), ClientCA: filepath.Join("testdata", "tls", "clients-ca.pem")},
		Destinations: map[string]*Destination{
			"github": {
				Name: "github", Type: TypeStreamableHTTP, URL: "https://api.githubcopilot.com/mcp",
				// The secrets file wins over the environment.
				Headers:        map[string]string{"Authorization": "Bearer ghp_secret_from_file", "X-Static": "plain"},
				ForwardHeaders: []string{"X-Request-Id"},
				Timeout:        2 * time.Minute,
				Secrets:        Secrets{"GITHUB_TOKEN": "ghp_secret_from_file"},
			},
			"legacy": {
				Name: "legacy", Type: TypeSSE, LegacySSE: true,
				URL: "https://mcp.example.com/legacy/sse?key=legacy-env-key",
			},
			"context7": {
				Name: "context7", Type: TypeStdio, LegacySSE: true, Protocol: ProtocolLegacy,
				Command:   []string{"npx", "-y", "@upstash/context7-mcp"},
				Args:      []string{"--transport", "stdio"},
				Env:       map[string]string{"NODE_ENV": "production", "PORT": "8080"},
				Cwd:       filepath.Join("testdata", "work"),
				Isolation: IsolationSession,
				Secrets:   Secrets{"CONTEXT7_API_KEY": "ctx7-secret-value"},
			},
			"files": {
				Name: "files", Type: TypeStdio, LegacySSE: true,
				Command:   []string{"/opt/tools/mcp server", "--root"},
				Args:      []string{"/srv/data"},
				Isolation: IsolationShared,
			},
			"runtime": {
				Name: "runtime", Type: TypeAgentCore, LegacySSE: true,
				ARN:       "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/mcp_server-AbC123",
				Qualifier: "prod", SessionMode: SessionModeIdentity, Timeout: 90 * time.Second,
				AWS: &AWS{Profile: "my-sso-profile", AssumeRoleARN: "arn:aws:iam::123456789012:role/mcp-invoker", RoleSessionName: "switchboard"},
			},
			"billing": {
				Name: "billing", Type: TypeStreamableHTTP, LegacySSE: true, URL: "https://billing-mcp.us-east-1.api.aws/mcp",
				AWS: &AWS{Region: "us-east-1", Service: "billing-mcp", Profile: "billing", AssumeRoleARN: "arn:aws-us-gov:iam::123456789012:role/mcp/reader", RoleSessionName: "switchboard@gw"},
			},
			"signed": {
				Name: "signed", Type: TypeSSE, LegacySSE: true, URL: "https://mcp.internal.example.com/sse",
				AWS: &AWS{},
			},
		},
		Namespaces: map[string]*Namespace{
			"dev": {
				Name: "dev", Servers: []string{"github", "context7"}, ToolPrefix: ToolPrefixConflict,
				Tools:  ToolFilter{Allow: []string{"github__*", "context7__*"}, Deny: []string{"*delete*"}},
				Prefix: map[string]string{"github": ToolPrefixNever, "context7": "c7"},
				Overrides: map[string]map[string]*ToolOverride{"github": {
					"search_repositories": {Name: "find_repos", Description: "Search GitHub repositories by keyword.",
						Annotations: map[string]any{"readOnlyHint": true, "openWorldHint": true}},
					"delete_repository": {Hide: true},
				}},
				ToolSearch: true, CodeMode: CodeModeOn,
				Sandbox:    Sandbox{Timeout: 5 * time.Second, Memory: 32 << 20, MaxCalls: 200, MaxOutput: 16 << 10, Concurrency: 2},
				sandboxSet: true,
			},
			"docs": {Name: "docs", Servers: []string{"legacy"}, Extends: []string{"dev"}, ToolPrefix: ToolPrefixAlways, Sandbox: Sandbox{}.withDefaults()},
			"home": {Name: "home", Servers: []string{"files"}, Isolated: true, ToolPrefix: ToolPrefixNever, Sandbox: Sandbox{}.withDefaults()},
		},
		Groups: map[string]*Group{
			"everything": {Name: "everything", Namespaces: []string{"dev", "docs", "home"}, Forced: []string{"home"}},
		},
		Names:       []string{"github", "legacy", "context7", "files", "runtime", "billing", "signed"},
		substituted: []string{"api-token-value", "ghp_secret_from_file", "legacy-env-key"},
		// Not an error: the program is on the machine that serves.
		Warnings: []string{`testdata/full.good.yaml:139: warning: destinations.files: command "/opt/tools/mcp server" does not exist`},
	}
	assertEqual(t, c, want)
}

// assertEqual compares configs field by field so a failure names the field.
func assertEqual(t *testing.T, got, want *Config) {
	t.Helper()
	gv, wv := reflect.ValueOf(*got), reflect.ValueOf(*want)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		g, w := gv.Field(i), wv.Field(i)
		switch name {
		case "Destinations", "Namespaces", "Groups":
			for _, k := range g.MapKeys() {
				if wk := w.MapIndex(k); !wk.IsValid() {
					t.Errorf("%s[%v]: unexpected", name, k)
				} else if !reflect.DeepEqual(g.MapIndex(k).Interface(), wk.Interface()) {
					t.Errorf("%s[%v]:\n got %#v\nwant %#v", name, k, g.MapIndex(k).Elem().Interface(), wk.Elem().Interface())
				}
			}
			for _, k := range w.MapKeys() {
				if !g.MapIndex(k).IsValid() {
					t.Errorf("%s[%v]: missing", name, k)
				}
			}
		case "substituted":
			if !reflect.DeepEqual(got.substituted, want.substituted) {
				t.Errorf("substituted: got %d values, want %d", len(got.substituted), len(want.substituted))
			}
		default:
			if !reflect.DeepEqual(g.Interface(), w.Interface()) {
				t.Errorf("%s: got %#v, want %#v", name, g.Interface(), w.Interface())
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	for _, data := range []string{"", "# nothing\n", "listen:\ntimeout: ~\nrestart:\n"} {
		c, err := testLoader(nil).parse([]byte(data), "testdata/none/switchboard.yaml")
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		want := defaultConfig()
		want.Restart.MaxAttempts = 3
		assertEqual(t, c, want)
	}
}

func TestMinimal(t *testing.T) {
	t.Parallel()
	c, err := testLoader(nil).load("testdata/minimal.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Names, []string{"github", "legacy", "context7"}; !slices.Equal(got, want) {
		t.Errorf("Names = %q, want %q", got, want)
	}
	d := c.Destinations["context7"]
	if !slices.Equal(d.Command, []string{"npx", "-y", "@upstash/context7-mcp"}) || d.Args != nil {
		t.Errorf("context7 Command = %q, Args = %q", d.Command, d.Args)
	}
	if d.Isolation != IsolationShared || !d.LegacySSE {
		t.Errorf("context7 Isolation = %q, LegacySSE = %v; want defaults", d.Isolation, d.LegacySSE)
	}
	if g := c.Destinations["github"]; g.Isolation != "" || g.Timeout != 0 {
		t.Errorf("github Isolation = %q, Timeout = %v; want zero", g.Isolation, g.Timeout)
	}
	if c.SecretsFile != "" {
		t.Errorf("SecretsFile = %q, want none", c.SecretsFile)
	}
}

func TestAnchors(t *testing.T) {
	t.Parallel()
	c, err := testLoader(nil).load("testdata/anchors.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Destinations["a"], c.Destinations["b"]
	if a.Type != TypeStdio || a.Isolation != IsolationSession || b.Isolation != IsolationShared {
		t.Errorf("a = %+v, b = %+v", a, b)
	}
}

func TestCommandForms(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DIR": "/opt/my tools"}
	for _, tt := range []struct {
		command string
		want    []string
	}{
		{`npx  -y	pkg`, []string{"npx", "-y", "pkg"}},
		{`${DIR}/server --flag`, []string{"/opt/my tools/server", "--flag"}},
		{`["/opt/my tools/server", "a b"]`, []string{"/opt/my tools/server", "a b"}},
		{"\n      - node\n      - server.js", []string{"node", "server.js"}},
	} {
		data := "destinations:\n  x:\n    type: stdio\n    command: " + tt.command + "\n"
		c, err := testLoader(env).parse([]byte(data), "x.yaml")
		if err != nil {
			t.Errorf("%s: %v", tt.command, err)
			continue
		}
		if got := c.Destinations["x"].Command; !slices.Equal(got, tt.want) {
			t.Errorf("%s: Command = %q, want %q", tt.command, got, tt.want)
		}
	}
}

func TestInterpolation(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PORT": "9000", "EMPTY": "", "SECS": "45s", "ON": "true", "N": "7", "TOKEN": "env-token"}
	data := `
listen: 127.0.0.1:${PORT}
timeout: ${SECS}
max_sessions: ${N}
log: {file: "$${HOME}/log ${EMPTY:-fallback} ${UNSET:-x y}"}
audit: {log_bodies: "${ON}"}
destinations:
  h:
    type: streamable_http
    url: https://h.example.com/mcp
    headers:
      A: ${TOKEN}
      B: ${env:TOKEN}
      C: "cost $5"
`
	secretsFile := "h:\n  TOKEN: secret-token\n"
	l := loader{
		lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		readFile: func(name string) ([]byte, error) {
			if name == filepath.Join("dir", "secrets.yml") {
				return []byte(secretsFile), nil
			}
			return nil, fs.ErrNotExist
		},
	}
	c, err := l.parse([]byte(data), "dir/switchboard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9000" || c.Timeout != 45*time.Second || c.MaxSessions != 7 || !c.Audit.LogBodies {
		t.Errorf("Listen %q Timeout %v MaxSessions %d LogBodies %v", c.Listen, c.Timeout, c.MaxSessions, c.Audit.LogBodies)
	}
	if want := filepath.Join("dir", "${HOME}/log fallback x y"); c.Log.File != want {
		t.Errorf("Log.File = %q, want %q", c.Log.File, want)
	}
	h := c.Destinations["h"].Headers
	if h["A"] != "secret-token" || h["B"] != "env-token" || h["C"] != "cost $5" {
		t.Errorf("Headers = %q", h)
	}
	if got, want := c.SecretValues(), []string{"secret-token", "env-token"}; !slices.Equal(got, want) {
		t.Errorf("SecretValues() = %q, want %q", got, want)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	lookup := func(name string, envOnly bool) (string, bool) {
		switch name {
		case "A":
			return "a", true
		case "E":
			return "", true
		}
		return "", false
	}
	for _, tt := range []struct {
		in, out string
		errs    []string
	}{
		{"plain", "plain", nil},
		{"$A ${A}", "$A a", nil},
		{"$${A}", "${A}", nil},
		{"$$${A}", "$${A}", nil},
		{"${A}${A}", "aa", nil},
		{"${E:-d}${Z:-}", "d", nil},
		{"${Z}", "", []string{"${Z} is not set"}},
		{"${env:Z}", "", []string{"${env:Z} is not set"}},
		{"${}", "", []string{"invalid reference ${}: want ${NAME}, ${NAME:-default} or ${env:NAME}"}},
		{"${1A}", "", []string{"invalid reference ${1A}: want ${NAME}, ${NAME:-default} or ${env:NAME}"}},
		{"x${A", "x${A", []string{`unterminated "${" (write "$${" for a literal "${")`}},
	} {
		out, _, errs := expand(tt.in, lookup)
		if out != tt.out || !slices.Equal(errs, tt.errs) {
			t.Errorf("expand(%q) = %q, %q; want %q, %q", tt.in, out, errs, tt.out, tt.errs)
		}
	}
}

func TestSecretsDefaultFile(t *testing.T) {
	t.Parallel()
	c, err := testLoader(nil).load("testdata/withsecrets/switchboard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("testdata", "withsecrets", "secrets.yml"); c.SecretsFile != want {
		t.Errorf("SecretsFile = %q, want %q", c.SecretsFile, want)
	}
	if got := c.Destinations["context7"].Secrets["CONTEXT7_API_KEY"]; got != "sk-default-file" {
		t.Errorf("secret = %q", got)
	}
	if got := c.SecretValues(); !slices.Equal(got, []string{"sk-default-file"}) {
		t.Errorf("SecretValues() = %q", got)
	}
}

// TestSecretsNeverInErrors loads configurations full of mistakes around
// secret values and checks that no message quotes one.
func TestSecretsNeverInErrors(t *testing.T) {
	t.Parallel()
	const secret = "S3CR3T-VALUE"
	secrets := map[string]string{
		"ok.yml":     "h:\n  TOKEN: " + secret + "\n  URL: \"http://[" + secret + "\"\n  NL: \"" + secret + "\\nX\"\n",
		"num.yml":    "h:\n  PIN: 123456789\n",
		"syntax.yml": "h:\n  TOKEN: '" + secret + "\n  X: [\n",
		"tab.yml":    "h:\n\tTOKEN: " + secret + "\n",
		"dup.yml":    "h:\n  TOKEN: " + secret + "\n  TOKEN: " + secret + "x\n",
		"list.yml":   "h:\n  TOKEN: [" + secret + "]\n",
		"nomap.yml":  "h: " + secret + "\n",
		"unk.yml":    "nope:\n  TOKEN: " + secret + "\n",
	}
	env := map[string]string{"ENV_SECRET": secret, "MAX_STDIO_CONNECTIONS": "x", "AUDIT_LOG_BODIES": "x"}
	l := loader{
		lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		readFile: func(name string) ([]byte, error) {
			if s, ok := secrets[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		},
	}
	for file := range secrets {
		for _, dest := range []string{
			"type: streamable_http\n    url: ${URL}\n    headers: {A: \"${NL}\", B: ${TOKEN}, \"C D\": ${TOKEN}}",
			"type: sse\n    url: \"${TOKEN}:x\"",
			"type: sse\n    url: \"${ENV_SECRET}\"",
			"type: stdio\n    command: [\"${ENV_SECRET};\"]\n    env: {A: \"${ENV_SECRET}\"}\n    url: ${TOKEN}",
			"type: ${TOKEN}",
		} {
			data := "secrets_file: " + file + "\ndestinations:\n  h:\n    " + dest + "\n"
			_, err := l.parse([]byte(data), "switchboard.yaml")
			if err == nil {
				t.Errorf("%s: no error for\n%s", file, data)
				continue
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "123456789") {
				t.Errorf("%s: error reveals a secret:\n%v", file, err)
			}
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env         map[string]string
		maxSessions int
		logBodies   bool
		err         string
	}{
		{nil, 10, false, ""},
		{map[string]string{"MAX_STDIO_CONNECTIONS": "3"}, 3, false, ""},
		{map[string]string{"MAX_STDIO_CONNECTIONS": ""}, 10, false, ""},
		{map[string]string{"AUDIT_LOG_BODIES": "1"}, 10, true, ""},
		{map[string]string{"AUDIT_LOG_BODIES": "true"}, 10, true, ""},
		{map[string]string{"AUDIT_LOG_BODIES": "0"}, 10, false, ""},
		{map[string]string{"MAX_STDIO_CONNECTIONS": "many"}, 0, false, `MAX_STDIO_CONNECTIONS: invalid value "many": want a positive integer`},
		{map[string]string{"MAX_STDIO_CONNECTIONS": "0"}, 0, false, `MAX_STDIO_CONNECTIONS: invalid value "0"`},
		{map[string]string{"AUDIT_LOG_BODIES": "yes please"}, 0, false, `AUDIT_LOG_BODIES: invalid value "yes please"`},
	} {
		c, err := testLoader(tt.env).parse([]byte("max_sessions: 10\n"), "x.yaml")
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("env %v: error %v, want %q", tt.env, err, tt.err)
			}
		case err != nil:
			t.Errorf("env %v: %v", tt.env, err)
		case c.MaxSessions != tt.maxSessions || c.Audit.LogBodies != tt.logBodies:
			t.Errorf("env %v: MaxSessions %d LogBodies %v, want %d %v", tt.env, c.MaxSessions, c.Audit.LogBodies, tt.maxSessions, tt.logBodies)
		}
	}
}

// TestAllErrors checks that one load reports every problem, sorted by line.
func TestAllErrors(t *testing.T) {
	t.Parallel()
	data := `timeout: 30
listn: x
destinations:
  a:
    type: stdio
  b:
    type: sse
    urll: x
namespaces:
  n:
    servers: [a, c]
`
	_, err := testLoader(nil).parse([]byte(data), "sb.yaml")
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T %v, want Errors", err, err)
	}
	want := []string{
		`sb.yaml:1: timeout: invalid duration 30: missing unit (write it like "30s")`,
		`sb.yaml:2: unknown key "listn" (did you mean listen?)`,
		`sb.yaml:4: destinations.a: command is required for type stdio`,
		`sb.yaml:6: destinations.b: url is required for type sse`,
		`sb.yaml:8: destinations.b: unknown key "urll" (did you mean url?)`,
		`sb.yaml:11: namespaces.n: unknown destination "c" in servers`,
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load("testdata/does-not-exist.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("destinations:\n  e:\n    type: sse\n    url: http://127.0.0.1:1/sse\n"), "testdata/none/x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Destinations["e"].Type != TypeSSE {
		t.Errorf("got %+v", c.Destinations["e"])
	}
}

// TestAWSBlock: written without a value the block still asks for signing,
// left out it is nil, and its strings take ${VAR} like any other.
func TestAWSBlock(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ROLE": "arn:aws:iam::123456789012:role/r", "PROFILE": "sso"}
	for _, tt := range []struct {
		block string
		want  *AWS
	}{
		{"", nil},
		{"\n    aws:", &AWS{}},
		{"\n    aws: {}", &AWS{}},
		{"\n    aws:\n      profile: ${PROFILE}\n      assume_role_arn: ${ROLE}\n      region: ${REGION:-eu-west-3}",
			&AWS{Profile: "sso", AssumeRoleARN: "arn:aws:iam::123456789012:role/r", Region: "eu-west-3"}},
		{"\n    aws: {service: ~}", &AWS{}},
	} {
		data := "destinations:\n  x:\n    type: streamable_http\n    url: https://h.example.com/mcp" + tt.block + "\n"
		c, err := testLoader(env).parse([]byte(data), "x.yaml")
		if err != nil {
			t.Errorf("%q: %v", tt.block, err)
			continue
		}
		if got := c.Destinations["x"].AWS; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: AWS = %+v, want %+v", tt.block, got, tt.want)
		}
	}
	// A native JSON file decodes it the same way.
	c, err := testLoader(nil).load("testdata/native.good.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Destinations["billing"].AWS, (&AWS{Profile: "billing", AssumeRoleARN: "arn:aws:iam::123456789012:role/mcp-reader"}); !reflect.DeepEqual(got, want) {
		t.Errorf("native.good.json: AWS = %+v, want %+v", got, want)
	}
}

// TestReadmeAWSExample: the gateway example of the aws block in
// docs/aws-agentcore.md loads, with the values it shows.
func TestReadmeAWSExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/aws-agentcore.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, b := range strings.Split(string(readme), "```yaml\n")[1:] {
		if b, _, _ = strings.Cut(b, "```"); strings.Contains(b, "type: agentcore") && strings.Contains(b, "aws:") {
			block = b
		}
	}
	if block == "" {
		t.Fatal("docs/aws-agentcore.md has no yaml example with an agentcore destination and an aws block")
	}
	c, err := testLoader(nil).parse([]byte(block), "testdata/none/README.md")
	if err != nil {
		t.Fatalf("README aws example: %v", err)
	}
	if a := c.Destinations["billing"].AWS; a == nil || a.Service != "billing-mcp" || a.AssumeRoleARN == "" {
		t.Errorf("billing.aws = %+v", a)
	}
	if a := c.Destinations["docs"].AWS; a == nil || a.Profile != "my-sso-profile" {
		t.Errorf("docs.aws = %+v", a)
	}
}

// TestUnsetVariableOnce: an unset variable is one error, naming every line
// that uses it, and the value it leaves behind gets no second error ("url
// must start with http://" for "/sse").
func TestUnsetVariableOnce(t *testing.T) {
	t.Parallel()
	_, err := testLoader(testEnv).load("testdata/unset_var_once.bad.yaml")
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T), want Errors", err, err)
	}
	want := []string{
		"testdata/unset_var_once.bad.yaml:4: destinations.ops.url: ${SWITCHBOARD_UNSET_OPS_URL} is not set",
		"testdata/unset_var_once.bad.yaml:6: destinations.ops.headers.Authorization: ${SWITCHBOARD_UNSET_OPS_TOKEN} is not set (also used at line 11)",
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCommandWarnings: a stdio command that cannot be started here is a
// warning (the configuration is valid: the program may exist where it is
// served), one per testdata/*.warn.yaml.
func TestCommandWarnings(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"command_missing.warn.yaml":        `testdata/command_missing.warn.yaml:4: warning: destinations.ops: command "/nonexistent/server" does not exist`,
		"command_not_in_path.warn.yaml":    `testdata/command_not_in_path.warn.yaml:4: warning: destinations.ops: command "switchboard-test-no-such-program" is not found in PATH; install it, or write its full path`,
		"command_not_executable.warn.yaml": `testdata/command_not_executable.warn.yaml:4: warning: destinations.ops: command "./not-executable.sh" is not executable (chmod +x ./not-executable.sh)`,
		"command_directory.warn.yaml":      `testdata/command_directory.warn.yaml:4: warning: destinations.ops: command "./clientsecrets" is a directory, not a program`,
	}
	files, err := filepath.Glob("testdata/*.warn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := want[filepath.Base(f)]; !ok {
			t.Errorf("%s has no row in want", f)
		}
	}
	for name, w := range want {
		c, err := testLoader(testEnv).load(filepath.Join("testdata", name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !slices.Equal(c.Warnings, []string{w}) {
			t.Errorf("%s: warnings %q, want %q", name, c.Warnings, w)
		}
	}
	// A program that is there: no warning.
	c, err := Parse([]byte("destinations:\n  ok:\n    type: stdio\n    command: [sh, -c, exit]\n"), "ok.yaml")
	if err != nil || c.Warnings != nil {
		t.Errorf("sh: %v, warnings %q", err, c.Warnings)
	}
}

// TestKeysOfAreAccepted: every key the structs' tags name, which "did you
// mean" suggests, is one the decoder takes (a key it does not know would be
// suggested wrongly).
func TestKeysOfAreAccepted(t *testing.T) {
	t.Parallel()
	// The keys of each mapping of the schema, by path with names as "*".
	keysOf := map[string][]string{}
	var walk func(rt reflect.Type, path string)
	walk = func(rt reflect.Type, path string) {
		for rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		switch rt.Kind() {
		case reflect.Struct:
			for _, f := range fieldsOf(rt) {
				keysOf[path] = append(keysOf[path], f.key)
				walk(rt.Field(f.index).Type, strings.TrimPrefix(path+"."+f.key, "."))
			}
		case reflect.Map:
			walk(rt.Elem(), path+".*")
		}
	}
	walk(reflect.TypeFor[Config](), "")
	// A document nesting parent's path, with key under it.
	doc := func(parent, key string) string {
		var b strings.Builder
		indent := ""
		if parent != "" {
			for _, seg := range strings.Split(parent, ".") {
				if seg == "*" {
					seg = "x"
				}
				b.WriteString(indent + seg + ":\n")
				indent += "  "
			}
		}
		b.WriteString(indent + key + ": null\n")
		return b.String()
	}
	for parent, keys := range keysOf {
		for _, k := range keys {
			_, err := Parse([]byte(doc(parent, k)), "keys.yaml")
			if err != nil && strings.Contains(err.Error(), "unknown key") {
				t.Errorf("%s.%s: %v", parent, k, err)
			}
		}
	}
	for _, c := range []struct{ parent, key, want string }{
		{"destinations.files", "isolaton", "isolation"},
		{"destinations.files", "comand", "command"},
		{"", "listn", "listen"},
		{"namespaces.dev.sandbox", "memroy", "memory"},
		{"destinations.files", "frobnicate", ""},
		{"destinations.files", "ur", "url"},
		{"mcpServers.x", "comand", ""}, // no table: no guess
	} {
		if got := suggestKey(c.parent, c.key); got != c.want {
			t.Errorf("suggestKey(%q, %q) = %q, want %q", c.parent, c.key, got, c.want)
		}
	}
}

// TestAuditPath: audit.path keeps stderr and off as they are, makes a file
// absolute against the config's directory, and is "" (the default file in
// the state directory) when not set.
func TestAuditPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "",
		"audit: {path: stderr}\n":       AuditStderr,
		"audit: {path: \"off\"}\n":      AuditOff,
		"audit: {path: logs/a.jsonl}\n": filepath.Join("/etc/sb", "logs", "a.jsonl"),
		"audit: {path: /var/a.jsonl}\n": "/var/a.jsonl",
	} {
		c, err := Parse([]byte(in+"destinations:\n  x: {type: stdio, command: [cat]}\n"), "/etc/sb/switchboard.yaml")
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if c.Audit.Path != want {
			t.Errorf("%q: audit.path %q, want %q", in, c.Audit.Path, want)
		}
	}
}

// TestDefaultAuditPath: $STATE_DIRECTORY (systemd), else
// $XDG_STATE_HOME/switchboard, else ~/.local/state/switchboard.
func TestDefaultAuditPath(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("STATE_DIRECTORY", "/var/lib/switchboard:/var/lib/other")
	t.Setenv("XDG_STATE_HOME", "/xdg")
	if got := DefaultAuditPath(); got != "/var/lib/switchboard/audit.jsonl" {
		t.Errorf("with STATE_DIRECTORY: %q", got)
	}
	t.Setenv("STATE_DIRECTORY", "")
	if got := DefaultAuditPath(); got != "/xdg/switchboard/audit.jsonl" {
		t.Errorf("with XDG_STATE_HOME: %q", got)
	}
	t.Setenv("XDG_STATE_HOME", "relative") // not absolute: ignored, as the spec says
	if got := DefaultAuditPath(); got != "/home/u/.local/state/switchboard/audit.jsonl" {
		t.Errorf("with HOME only: %q", got)
	}
}

// TestSchemaTags: every exported field of the schema's structs is a key
// (a yaml tag) or one the loader fills itself, every types tag names known
// destination types, and every min tag has its message, so that a field
// added without its tag, or a misspelt tag, fails here rather than being
// silently left out of the file.
func TestSchemaTags(t *testing.T) {
	t.Parallel()
	computed := map[string]bool{"Config.Names": true, "Config.ClientOrder": true, "Config.Format": true, "Config.Warnings": true,
		"Destination.Name": true, "Destination.ToolPrefix": true, "Destination.Secrets": true, "Namespace.Name": true,
		"Group.Name": true, "Group.Forced": true, "Client.Name": true}
	types := []string{TypeStdio, TypeStreamableHTTP, TypeSSE, TypeAgentCore}
	seen := map[reflect.Type]bool{}
	var walk func(rt reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Map || rt.Kind() == reflect.Slice {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || rt.PkgPath() != reflect.TypeFor[Config]().PkgPath() || seen[rt] {
			return
		}
		seen[rt] = true
		for i := range rt.NumField() {
			f := rt.Field(i)
			name := rt.Name() + "." + f.Name
			if !f.IsExported() {
				continue
			}
			if key := f.Tag.Get("yaml"); key == "" && !computed[name] {
				t.Errorf("%s has no yaml tag: it cannot be set from the file", name)
			}
			for _, ty := range strings.Split(f.Tag.Get("types"), ",") {
				if ty != "" && !slices.Contains(types, ty) {
					t.Errorf("%s: types tag names %q, not a destination type", name, ty)
				}
			}
			if m := f.Tag.Get("min"); m != "" {
				if n, err := strconv.ParseInt(m, 10, 64); err != nil || minMessages[n] == "" {
					t.Errorf("%s: min tag %q has no message", name, m)
				}
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[Config]())
	if len(seen) < 20 {
		t.Errorf("walked %d structs, want the whole schema", len(seen))
	}
}
