package config

import (
	"cmp"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// isClientConfig reports whether root is another client's configuration:
// a mapping with an "mcpServers" or "servers" key.
func isClientConfig(root *yaml.Node) bool {
	return findKey(root, "mcpServers") != nil || findKey(root, "servers") != nil
}

// findKey returns the value of key in mapping n, or nil.
func findKey(n *yaml.Node, key string) *yaml.Node {
	if n = resolve(n); n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

// ignoredServerKeys are members of a server entry that the clients writing
// these files use for their own purposes.
var ignoredServerKeys = map[string]bool{
	"name":          true, // the name, also given as the key (or read first in a list)
	"autoApprove":   true, // Cline, Roo Code
	"alwaysAllow":   true, // Roo Code
	"disabledTools": true, // Cline, Roo Code
	"description":   true,
	"icon":          true,
	"gallery":       true, // VS Code
	"version":       true, // VS Code
	"dev":           true, // VS Code: watch and debug settings
	"trust":         true, // Gemini CLI
	"includeTools":  true, // Gemini CLI
	"excludeTools":  true, // Gemini CLI
	"tool_timeout":  true, // MCProxy
	"tool_timeouts": true, // MCProxy
}

// decodeImport decodes a client configuration; see the package
// documentation for the formats.
func (d *decoder) decodeImport(root *yaml.Node, c *Config, dir string, readFile func(string) ([]byte, error)) {
	type pair struct {
		key, path string
		v         *yaml.Node
	}
	var sections []pair
	d.each(root, "", func(key string, v *yaml.Node, path string) {
		switch key {
		case "mcpServers", "servers", "namespaces", "groups":
			sections = append(sections, pair{key, path, v})
		}
		// Anything else belongs to the client that owns the file.
	})
	d.loadSecrets(c, dir, readFile)
	c.Format = FormatClient
	for _, s := range sections {
		switch {
		case s.key == "namespaces" || s.key == "groups":
			d.each(s.v, s.path, func(name string, v *yaml.Node, path string) {
				d.add(c, s.key, name, path, v)
			})
		case resolve(s.v).Kind == yaml.SequenceNode: // MCProxy
			c.Format = FormatMCProxy
			d.items(s.v, s.path, func(_ int, v *yaml.Node, ipath string) {
				n := findKey(v, "name")
				if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || n.Value == "" {
					d.errorf(v, ipath, "a server in a list needs a \"name\" string")
					return
				}
				d.addServer(c, n.Value, ipath, v)
			})
		default:
			d.each(s.v, s.path, func(name string, v *yaml.Node, path string) {
				d.addServer(c, name, path, v)
			})
		}
	}
}

// addServer decodes an imported server entry and adds it to c, unless it is
// disabled.
func (d *decoder) addServer(c *Config, name, path string, n *yaml.Node) {
	if _, dup := c.Destinations[name]; dup || d.disabled[name] {
		d.errorf(n, path, "duplicate server name %q", name)
		return
	}
	dst, enabled := d.importServer(name, n, path)
	if !enabled {
		d.disabled[name] = true
		return
	}
	d.order["destinations"] = append(d.order["destinations"], name)
	d.paths["destinations."+name] = path
	c.Destinations[name] = dst
	c.Names = append(c.Names, name)
}

// importServer decodes one server entry of a client configuration.
func (d *decoder) importServer(name string, n *yaml.Node, path string) (dst *Destination, enabled bool) {
	dst = &Destination{Name: name, LegacySSE: true}
	secret := scope{secrets: d.secrets[name], record: true}
	var typ, command string
	var commandNode *yaml.Node
	var httpURL bool
	enabled, disabled := true, false
	d.each(n, path, func(key string, v *yaml.Node, kpath string) {
		switch key {
		case "command":
			d.setString(&command, v, kpath, scope{})
			commandNode = v
		case "args":
			d.setStrings(&dst.Args, v, kpath, scope{})
		case "env":
			d.setStringMap(&dst.Env, v, kpath, scope{record: true}, nil)
		case "cwd":
			d.setString(&dst.Cwd, v, kpath, scope{})
		case "url", "serverUrl", "httpUrl":
			if dst.URL != "" {
				d.errorf(v, path, "%s: more than one of url, serverUrl and httpUrl", key)
			}
			d.pos[join(path, "url")] = d.pos[kpath]
			d.setString(&dst.URL, v, kpath, secret)
			httpURL = key == "httpUrl"
		case "headers":
			d.setStringMap(&dst.Headers, v, kpath, secret, textproto.CanonicalMIMEHeaderKey)
		case "type", "transportType":
			d.pos[join(path, "type")] = d.pos[kpath]
			d.setString(&typ, v, kpath, scope{})
		case "timeout":
			d.setSeconds(&dst.Timeout, v, kpath)
		case "enabled":
			d.setBool(&enabled, v, kpath)
		case "disabled":
			d.setBool(&disabled, v, kpath)
		case "envFile":
			d.errorf(v, kpath, "not supported: move the variables into env or the secrets file")
		default:
			if !ignoredServerKeys[key] {
				d.unknown(kpath, key)
			}
		}
	})
	if command != "" {
		if msg := importCommandError(resolve(commandNode).Value, dst.Args); msg != "" {
			d.errorf(commandNode, join(path, "command"), "%s", msg)
		}
		dst.Command = []string{command}
	}
	switch {
	case typ != "":
		dst.Type = cmp.Or(importTypes[strings.ToLower(typ)], typ) // an unknown one is reported by validate
	case dst.URL != "" && !httpURL && isSSEPath(dst.URL):
		dst.Type = TypeSSE
	case dst.URL != "":
		dst.Type = TypeStreamableHTTP
	case dst.Command != nil:
		dst.Type = TypeStdio
	}
	return dst, enabled && !disabled
}

// importTypes maps the lower-cased types the clients write to ours.
var importTypes = map[string]string{"stdio": TypeStdio, "sse": TypeSSE, "http": TypeStreamableHTTP,
	"streamable-http": TypeStreamableHTTP, "streamable_http": TypeStreamableHTTP, "streamablehttp": TypeStreamableHTTP}

// isSSEPath reports whether rawURL's path ends in /sse, the convention for
// legacy HTTP+SSE endpoints.
func isSSEPath(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/sse")
}

// setSeconds decodes a timeout given as a number of seconds (as the clients
// write it) or as a duration string.
func (d *decoder) setSeconds(p *time.Duration, n *yaml.Node, path string) {
	n = resolve(n)
	if isNull(n) || n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		d.setDuration(p, n, path)
		return
	}
	secs, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || secs > float64(1<<63-1)/float64(time.Second) || secs < -float64(1<<63-1)/float64(time.Second) {
		d.errorf(n, path, "invalid number of seconds %s", n.Value)
		return
	}
	*p = time.Duration(secs * float64(time.Second))
}
