// Package config defines Switchboard's configuration file and turns it into a
// validated, read-only *Config. It is the only package that knows the YAML
// schema; the gateway translates a Config into the structs of its other
// packages. config imports no other internal package and never logs: every
// problem comes back as an error.
//
// [Load] and [Parse] read a native YAML or JSON file, or the JSON of another
// MCP client or gateway (Claude Desktop, Cursor, VS Code, MCProxy) or
// mithril-proxy's destinations.yml, with its secrets file; they expand
// ${VAR} references, decode strictly over the defaults, apply the
// environment overrides and validate the whole Config. Every problem found
// is returned at once as [Errors], sorted by file and line, each reading
// "file:line: path: detail":
//
//	switchboard.yaml:12: destinations.github: unknown key "urll" (did you mean url?)
//
// No error message contains a secret: a value from the secrets file, or a
// value substituted into url, headers or env. The returned Config is
// read-only: callers must not modify it or copy it shallowly, so that a
// reload can compare an old and a new Config.
//
// The steps in order, the ${VAR} syntax, the secrets file and the formats
// imported are described in docs/configuration.md ("How a file is read").
package config
