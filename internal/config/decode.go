package config

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"math"
	"net/textproto"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// parse runs the whole pipeline described in the package documentation.
func (l loader) parse(data []byte, filename string) (*Config, error) {
	var errs []*posError
	d := newDecoder(cmp.Or(filename, "config"), l.lookupEnv, &errs)
	c := defaultConfig()

	parseDoc, isJS := parseYAML, isJSON(data)
	if isJS {
		parseDoc = parseJSON
	}
	root, err := parseDoc(data)
	if err != nil {
		d.syntaxErr(err)
		return nil, d.result()
	}

	dir := filepath.Dir(filename)
	if isFlatDestinations(root) {
		// mithril-proxy's destinations.yml may leave out "destinations:".
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "destinations", Line: root.Line}, root,
		}}
	}
	if isJS && isClientConfig(root) {
		d.imported = true
		d.decodeImport(root, c, dir, l.readFile)
	} else {
		d.decodeNative(root, c, dir, l.readFile)
	}
	d.attachSecrets(c)
	d.applyEnv(c)
	d.finish(c, dir)
	d.finishGuards(c, filename)
	d.validate(c)
	if len(errs) > 0 {
		return nil, d.result()
	}
	for _, ns := range c.Namespaces {
		ns.Servers = slices.DeleteFunc(ns.Servers, func(s string) bool { return d.disabled[s] })
	}
	c.substituted = d.subst
	d.warn(c)
	return c, nil
}

// result returns the errors reported so far as a sorted Errors.
func (d *decoder) result() error {
	sortErrors(*d.errs, d.file)
	out := make(Errors, len(*d.errs))
	for i, e := range *d.errs {
		out[i] = e
	}
	return out
}

// parseYAML parses a single YAML document and returns its top node, or nil
// for an empty document.
func parseYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, &syntaxError{line: extra.Line, msg: "multiple YAML documents; a configuration is one document"}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return doc.Content[0], nil
	}
	return nil, nil
}

// syntaxError is a parse error at a known line.
type syntaxError struct {
	line int
	msg  string
}

func (e *syntaxError) Error() string { return e.msg }

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxErr reports a parse error, moving the line number yaml puts in its
// message to the front.
func (d *decoder) syntaxErr(err error) {
	var se *syntaxError
	if errors.As(err, &se) {
		d.errorLine(se.line, "", "%s", se.msg)
		return
	}
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.errorLine(line, "", "%s", m[2])
		return
	}
	d.errorLine(0, "", "%s", strings.TrimPrefix(msg, "yaml: "))
}

// decodeNative decodes the Switchboard schema: the fields of Config, then,
// once the secrets file is read, the sections that may use it.
func (d *decoder) decodeNative(root *yaml.Node, c *Config, dir string, readFile func(string) ([]byte, error)) {
	var later []func()
	d.decodeStruct(reflect.ValueOf(c).Elem(), root, "", scope{}, func(key string, v *yaml.Node, path string) bool {
		switch key {
		case "destinations", "namespaces", "groups", "clients":
			later = append(later, func() {
				d.each(v, path, func(name string, v *yaml.Node, path string) { d.add(c, key, name, path, v) })
			})
		case "limits":
			later = append(later, func() { d.decodeValue(reflect.ValueOf(&c.Limits).Elem(), v, path, scope{}) })
		default:
			return strings.HasPrefix(key, "x-") // extension keys, for anchors
		}
		return true
	})
	d.loadSecrets(c, dir, readFile)
	for _, f := range later {
		f()
	}
}

// add decodes the entry name of section ("destinations", "namespaces",
// "groups" or "clients") from n and adds it to c.
func (d *decoder) add(c *Config, section, name, path string, n *yaml.Node) {
	d.order[section] = append(d.order[section], name)
	d.paths[section+"."+name] = path
	d.ent = d.secrets[name]
	switch r := resolve(n); section {
	case "destinations":
		dst := &Destination{Name: name, LegacySSE: true}
		if r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str" {
			// mithril-proxy's flat form, name: url: a legacy SSE server.
			d.setString(&dst.URL, r, path, scope{secrets: d.ent, record: true})
			dst.Type, dst.URL = TypeSSE, flatSSEURL(dst.URL)
		} else {
			d.decode(dst, n, path)
		}
		c.Destinations[name] = dst
		c.Names = append(c.Names, name)
	case "namespaces":
		ns := &Namespace{Name: name, ToolPrefix: ToolPrefixAlways}
		if r.Kind == yaml.SequenceNode {
			// MCProxy's shorthand: a namespace written as its list of servers.
			d.setStrings(&ns.Servers, r, join(path, "servers"), scope{})
		} else {
			d.decode(ns, n, path)
		}
		c.Namespaces[name] = ns
	case "groups":
		g := &Group{Name: name}
		d.decode(g, n, path)
		for i, ns := range g.Namespaces {
			if forced, ok := strings.CutPrefix(ns, "!"); ok {
				g.Namespaces[i] = forced
				g.Forced = append(g.Forced, forced)
			}
		}
		c.Groups[name] = g
	case "clients":
		cl := &Client{Name: name}
		d.decode(cl, n, path)
		if c.Clients == nil {
			c.Clients = map[string]*Client{}
		}
		c.Clients[name] = cl
		c.ClientOrder = append(c.ClientOrder, name)
	}
}

// isFlatDestinations reports whether root is a mapping of names to http(s)
// URLs and nothing else: mithril-proxy's destinations.yml without the
// "destinations:" key. No key of the native schema takes a URL.
func isFlatDestinations(root *yaml.Node) bool {
	root = resolve(root)
	if root == nil || root.Kind != yaml.MappingNode || len(root.Content) == 0 {
		return false
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], resolve(root.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" || v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			return false
		}
		if l := strings.ToLower(v.Value); !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
			return false
		}
	}
	return true
}

// flatSSEURL turns the URL of a flat destination into the SSE endpoint, as
// mithril-proxy did: its URL is a base to which "/sse" is appended, unless
// its path already ends in "/sse". A trailing slash is dropped first.
func flatSSEURL(u string) string {
	base, rest := u, ""
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		base, rest = u[:i], u[i:]
	}
	base = strings.TrimRight(base, "/")
	if !strings.HasSuffix(base, "/sse") {
		base += "/sse"
	}
	return base + rest
}

// setCommand decodes a command: a list of strings, taken as written, or a
// string split on white space. The string form may not contain shell
// syntax (quotes, pipes, $VAR, ...; see shellProblem), since splitting
// would not honour it: the error shows the list to write instead.
func (d *decoder) setCommand(p *[]string, n *yaml.Node, path string) {
	n = resolve(n)
	switch {
	case isNull(n):
	case n.Kind == yaml.SequenceNode:
		d.setStrings(p, n, path, scope{})
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		if msg := commandLineError(n.Value, shellProblem(n.Value), nil, yamlCommand); msg != "" {
			d.errorf(n, path, "%s", msg)
			return
		}
		argv := []string{}
		for _, f := range strings.Fields(n.Value) {
			argv = append(argv, d.interp(n, path, f, scope{}))
		}
		*p = argv
	default:
		d.typeErr(n, path, "a string or a list of strings")
	}
}

// attachSecrets moves the secrets file's entries onto their destinations.
func (d *decoder) attachSecrets(c *Config) {
	for name, s := range d.secrets {
		dst, ok := c.Destinations[name]
		if _, client := c.Clients[name]; !ok && client {
			continue // a client's tokens (auth.go)
		}
		if !ok {
			*d.errs = append(*d.errs, &posError{file: c.SecretsFile, line: d.secretsAt[name], msg: "unknown destination " + strconv.Quote(name)})
			continue
		}
		dst.Secrets = s
	}
}

// applyEnv applies the environment overrides, which take precedence over
// the file. The names are mithril-proxy's.
func (d *decoder) applyEnv(c *Config) {
	if v, ok := d.lookupEnv("LOG_FILE"); ok && v != "" {
		if abs, err := filepath.Abs(v); err == nil {
			v = abs // relative to the working directory, not the config file
		}
		c.Log.File = v
	}
	if v, ok := d.lookupEnv("STDIO_RESPONSE_TIMEOUT_SECS"); ok && v != "" {
		secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || secs < 0 || secs > float64(1<<63-1)/float64(time.Second) || math.IsNaN(secs) {
			*d.errs = append(*d.errs, &posError{path: "STDIO_RESPONSE_TIMEOUT_SECS", msg: "invalid value " + strconv.Quote(v) + ": want a number of seconds (0 disables the timeout)"})
		} else {
			c.Timeout = time.Duration(secs * float64(time.Second))
		}
	}
	if v, ok := d.lookupEnv("MAX_STDIO_CONNECTIONS"); ok && v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			*d.errs = append(*d.errs, &posError{path: "MAX_STDIO_CONNECTIONS", msg: "invalid value " + strconv.Quote(v) + ": want a positive integer"})
		} else {
			c.MaxSessions = n
		}
	}
	if v, ok := d.lookupEnv("AUDIT_LOG_BODIES"); ok && v != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			*d.errs = append(*d.errs, &posError{path: "AUDIT_LOG_BODIES", msg: "invalid value " + strconv.Quote(v) + ": want 1, true, 0 or false"})
		} else if b {
			c.Audit.LogBodies = true
		}
	}
}

// finish fills the defaults that depend on other fields and resolves
// relative paths against dir.
func (d *decoder) finish(c *Config, dir string) {
	if !d.has("restart.max_attempts") {
		c.Restart.MaxAttempts = len(c.Restart.Delays)
	}
	c.Restart.RetryMax = max(c.Restart.RetryMax, c.Restart.RetryAfter)
	if p := c.Audit.Path; p != AuditStderr && p != AuditOff && p != "-" {
		absPaths(dir, &c.Audit.Path)
	}
	absPaths(dir, &c.Log.File)
	d.finishAuth(c, dir)
	if cl := c.Cluster; cl != nil {
		absPaths(dir, &cl.KeysFile)
		if r := cl.Redis; r != nil {
			absPaths(dir, &r.PasswordFile, &r.TLS.CAFile, &r.TLS.CertFile, &r.TLS.KeyFile)
		}
	}
	if c.Guards != nil && c.Guards.Hook != nil {
		absPaths(dir, &c.Guards.Hook.TokenFile)
	}
	for _, dst := range c.Destinations {
		if dst.Type == TypeStdio {
			dst.Isolation = cmp.Or(dst.Isolation, IsolationShared)
			absPaths(dir, &dst.Cwd)
		}
		if dst.OAuth != nil {
			absPaths(dir, &dst.OAuth.TokenDir, &dst.OAuth.ClientKeyFile)
		}
		for i, h := range dst.ForwardHeaders {
			dst.ForwardHeaders[i] = textproto.CanonicalMIMEHeaderKey(h)
		}
	}
}

// absPaths resolves each of paths that is relative against dir.
func absPaths(dir string, paths ...*string) {
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}
