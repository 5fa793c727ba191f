// Package config defines Switchboard's configuration file and turns it into a
// validated, read-only *Config. It is the only package that knows the YAML
// schema; the gateway translates a Config into the structs of its other
// packages. config imports no other internal package and never logs: every
// problem comes back as an error.
//
// # Load order
//
// [Load] and [Parse] run the same pipeline:
//
//  1. Parse the bytes into a node tree. A file whose first non-blank byte is
//     '{' is read as JSON (comments and trailing commas allowed, as in VS
//     Code's mcp.json); if its top-level object has an "mcpServers" or
//     "servers" member it is imported as a client configuration (see
//     below), otherwise it is read with the native schema like YAML.
//  2. Read the secrets file (the environment variable SECRETS_CONFIG, else
//     secrets_file, else secrets.yml or secrets.yaml beside the
//     configuration file) into per-destination maps.
//  3. Decode strictly, starting from the defaults: every key in the file
//     overwrites the default it names; a key set to null (`timeout:` with no
//     value) keeps the default. Unknown keys, duplicate keys and values of
//     the wrong type are errors, except top-level keys starting with "x-",
//     which are ignored so they can hold YAML anchors (as in Compose files).
//     ${VAR} references are expanded in every scalar value as it is
//     decoded (see Interpolation).
//  4. Attach secrets to destinations and apply the environment overrides,
//     which win over the file: MAX_STDIO_CONNECTIONS (replaces
//     max_sessions), AUDIT_LOG_BODIES (1 or true turns audit.log_bodies
//     on), LOG_FILE (replaces log.file) and STDIO_RESPONSE_TIMEOUT_SECS (a
//     number of seconds, replaces timeout), as mithril-proxy read them.
//  5. Fill the defaults that depend on other fields (stdio isolation) and
//     resolve relative paths (cwd, audit.path, log.file) against the
//     directory of the configuration file.
//  6. Validate the whole Config, cross-references included.
//
// Steps 3 to 6 collect every problem they find instead of stopping at the
// first, and Load and Parse return them together as [Errors], sorted by file
// and line. Each message reads "file:line: path: detail", for example
//
//	switchboard.yaml:12: destinations.github: unknown key "urll" (did you mean url?)
//
// No error message contains a secret: a value from the secrets file, or a
// value substituted into url, headers or env (see Interpolation).
//
// The returned Config is read-only: callers must not modify it or copy it
// shallowly, so that a reload can compare an old and a new Config.
//
// # Interpolation
//
// Scalar values may refer to environment variables:
//
//	${NAME}          the value of NAME; an error if NAME is not set
//	${NAME:-word}    the value of NAME, or word if NAME is unset or empty
//	${env:NAME}      NAME from the process environment only
//	$${              a literal "${"
//
// In the url and headers values of streamable_http and sse destinations,
// ${NAME} looks in the destination's secrets first and then in the process
// environment, so a header can carry a token that never appears in the
// configuration file. Values substituted into url, headers and env are
// reported by [Config.SecretValues]. The secrets file itself is not
// interpolated; its values are taken literally.
//
// # Secrets file
//
// The secrets file is YAML mapping destination names to environment-style
// key/value pairs:
//
//	context7:
//	  CONTEXT7_API_KEY: sk-...
//
// Every name must be a configured destination, every key a valid environment
// variable name and every value a string. The entries end up in
// Destination.Secrets, whose type prints its values as "[REDACTED]".
//
// # mithril-proxy's destinations.yml
//
// Its files load as they are. A destination may be written as just a URL,
// `name: https://host/base`, which is an sse destination whose endpoint is
// the URL plus "/sse" (as mithril-proxy used it; a URL already ending in
// /sse is kept). A file holding only such name: URL pairs, without the
// "destinations:" key, is read as the destinations.
//
// # Client configuration import
//
// The JSON files of other MCP clients and gateways load as they are:
//
//	Claude Desktop, Claude Code, Cursor, Windsurf, Cline:
//	    {"mcpServers": {"NAME": {"command": "npx", "args": [...], "env": {...}}}}
//	    {"mcpServers": {"NAME": {"url": "https://...", "headers": {...}, "type": "sse"}}}
//	VS Code (.vscode/mcp.json):
//	    {"servers": {"NAME": {"type": "stdio" | "http" | "sse", ...}}}
//	MCProxy (mcproxy.json):
//	    {"servers": [{"name": "NAME", "command": "...", "args": [...], "env": {...}}],
//	     "namespaces": {...}, "groups": {...}}
//
// The URL may also be given as "serverUrl" (Windsurf) or "httpUrl" (Gemini
// CLI, always Streamable HTTP), and "type" (or "transportType") may be
// stdio, sse, http, streamable-http or streamableHttp.
// A JSON "command" is argv[0] as written (it is not split on spaces, and
// one holding shell syntax, or several words whose first is not a path,
// is an error that shows the "command" and "args" to write); "args" are
// passed as written, never through a shell. A
// server without "type" is stdio when it has a command; with a URL it is sse
// when the URL path ends in "/sse" and streamable_http otherwise. "timeout"
// is a number of seconds. Servers with "disabled": true or "enabled": false
// are left out, and so are references to them from namespaces. Other
// top-level members belong to the client that owns the file and are ignored;
// server-level members those clients are known to carry (autoApprove,
// alwaysAllow, disabledTools, description, ...) are ignored too, and any
// other member is an error. "envFile" is an error rather than being ignored,
// because dropping its variables would start the server without them.
// Global settings (listen, timeouts, ...) keep their defaults.
package config
