package config

import (
	"errors"
	"maps"
	"net"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// nameRE is the syntax of destination, namespace and group names, which
// appear in URL paths.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// reserved names are route segments of the gateway itself.
var reserved = []string{"mcp", "sse", "healthz", "metrics"}

// validate reports every invalid value of c. A namespace or group may not
// share a destination's name (each is served at /{name}/mcp), nor a group a
// namespace's.
func (d *decoder) validate(c *Config) {
	d.checkMins(reflect.ValueOf(c).Elem(), "")
	d.validateGlobal(c)
	for _, name := range d.order["destinations"] {
		d.validateDestination(c.Destinations[name], d.paths["destinations."+name])
	}
	for _, name := range d.order["namespaces"] {
		d.validateNamespace(c, c.Namespaces[name], d.paths["namespaces."+name])
	}
	d.checkCycles(c)
	for _, name := range d.order["groups"] {
		d.validateGroup(c, c.Groups[name], d.paths["groups."+name])
	}
	d.validateAuth(c)
	d.validateGuards(c)
	d.validateGuardHook(c)
	d.validateCluster(c)
}

func (d *decoder) validateGlobal(c *Config) {
	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		d.errorAt("listen", "invalid address %q: want host:port", c.Listen)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		d.errorAt("listen", "invalid port %q", port)
	} else if strings.ContainsAny(host, "/ ") {
		d.errorAt("listen", "invalid host %q", host)
	}
	if c.MaxChildren < 0 {
		d.errorAt("max_children", "must not be negative (0 means max_sessions)")
	}
	for i, v := range c.Restart.Delays {
		if v < 0 {
			d.errorAt(index("restart.delays", i), "must not be negative")
		}
	}
	if n := c.Metrics.ToolLabels; n > MaxToolLabels {
		d.errorAt("metrics.tool_labels", "%d is more than %d: each name is a series per outcome; keep the cap small", n, MaxToolLabels)
	}
	if r := c.Tracing.SampleRatio; r < 0 || r > 1 {
		d.errorAt("tracing.sample_ratio", "%g is not between 0 and 1", r)
	}
	if e := c.Tracing.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.errorAt("tracing.endpoint", "%q is not an http(s) URL", e)
		}
	}
	if c.Tracing.ServiceName == "" {
		d.errorAt("tracing.service_name", "must not be empty")
	}
	d.oneOf("log.level", "log.level", "unknown level", c.Log.Level, "debug", "info", "warn", "error")
	for i, o := range c.AllowedOrigins {
		if o != "*" && !validOrigin(o) {
			d.errorAt(index("allowed_origins", i), "invalid origin %q: want scheme://host[:port] or \"*\"", o)
		}
	}
	for i, h := range c.AllowedHosts {
		if h != "*" && !validHost(h) {
			d.errorAt(index("allowed_hosts", i), "invalid host %q: want a host name or IP address without a port, or \"*\"", h)
		}
	}
}

// minMessages are the errors of a number below the minimum its min tag sets.
var minMessages = map[int64]string{
	-1: "must be -1 (no bound), 0 (the default) or positive",
	0:  "must not be negative",
	1:  "must be positive",
}

// checkMins reports every number in v that is below the minimum its field's
// min tag sets.
func (d *decoder) checkMins(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			d.checkMins(v.Elem(), path)
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			d.checkMins(v.MapIndex(k), path+"."+k.String())
		}
	case reflect.Struct:
		for _, f := range fieldsOf(v.Type()) {
			p, fv := join(path, f.key), v.Field(f.index)
			if m := v.Type().Field(f.index).Tag.Get("min"); m != "" {
				if min, _ := strconv.ParseInt(m, 10, 64); fv.Int() < min {
					d.errorAt(p, "%s", minMessages[min])
				}
			}
			d.checkMins(fv, p)
		}
	}
}

func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && u.Scheme != "" && u.Host != "" && u.User == nil &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && u.Opaque == ""
}

func validHost(h string) bool {
	if _, _, err := net.SplitHostPort(h); err == nil {
		return false // has a port
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return h != "" && !strings.ContainsAny(h, "/\\@ \t?#")
}

// validName checks the name of a destination, namespace or group.
func (d *decoder) validName(name, p string) {
	switch {
	case !nameRE.MatchString(name):
		d.errorAt(p, "invalid name: want 1 to 64 letters, digits, '_' or '-'")
	case slices.Contains(reserved, name):
		d.errorAt(p, "name %q is reserved (routes /mcp, /sse, /healthz and /metrics)", name)
	}
}

func (d *decoder) validateDestination(dst *Destination, p string) {
	d.validName(dst.Name, p)
	if dst.Timeout < 0 {
		d.errorIn(p+".timeout", p, "timeout must not be negative")
	}
	switch dst.Type {
	case TypeStdio:
		d.validateStdio(dst, p)
	case TypeStreamableHTTP, TypeSSE:
		d.validateHTTP(dst, p)
	case TypeAgentCore:
		d.validateAgentCore(dst, p)
	case "":
		if d.failed[p+".type"] {
			break
		}
		if d.imported {
			d.errorAt(p, "needs a command or a url")
		} else {
			hint := ""
			if dst.URL != "" && dst.Command == nil {
				// mithril-proxy took such an entry as sse at url + /sse.
				hint = "; for an sse server at url plus /sse, write the destination as just its URL (name: https://host/base)"
			}
			d.errorAt(p, "type is required: stdio, streamable_http, sse or agentcore%s", hint)
		}
	default:
		d.errorIn(p+".type", p, "unknown type %q: want stdio, streamable_http, sse or agentcore", dst.Type)
	}
	d.oneOf(p+".protocol", p, "unknown protocol", dst.Protocol, "", ProtocolAuto, ProtocolLegacy, ProtocolModern)
	if dst.Protocol == ProtocolModern && dst.Type == TypeSSE {
		d.errorIn(p+".protocol", p, "protocol modern is not valid for type sse (HTTP+SSE is a legacy transport)")
	}
	if slices.Contains([]string{TypeStdio, TypeStreamableHTTP, TypeSSE, TypeAgentCore}, dst.Type) {
		v := reflect.ValueOf(dst).Elem()
		for _, f := range fieldsOf(v.Type()) {
			types := strings.Split(v.Type().Field(f.index).Tag.Get("types"), ",")
			if types[0] != "" && !v.Field(f.index).IsZero() && !slices.Contains(types, dst.Type) {
				d.errorIn(p+"."+f.key, p, "%s is not valid for type %s", f.key, dst.Type)
			}
		}
	}
	if dst.AWS != nil && dst.Type != TypeStdio && dst.Type != "" {
		d.validateAWS(dst, p)
	}
	if dst.OAuth != nil && (dst.Type == TypeStreamableHTTP || dst.Type == TypeSSE) {
		d.validateUpstreamOAuth(dst, p)
	}
}

var (
	// regionRE is the shape of an AWS region name: us-east-1,
	// us-gov-west-1, cn-north-1.
	regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	// serviceRE is a SigV4 signing name: billing-mcp, execute-api.
	serviceRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	// roleARNRE is an IAM role ARN, with an optional path.
	roleARNRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`)
	// roleSessionRE is sts:AssumeRole's RoleSessionName.
	roleSessionRE = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
)

// validateAWS checks the aws block of an HTTP or agentcore destination.
func (d *decoder) validateAWS(dst *Destination, p string) {
	a, ap := dst.AWS, p+".aws"
	switch {
	case a.Region == "":
	case !regionRE.MatchString(a.Region):
		d.errorIn(ap+".region", p, "aws.region %q: want a region name like us-east-1", a.Region)
	case dst.Type == TypeAgentCore && runtimeARN.MatchString(dst.ARN) && strings.Split(dst.ARN, ":")[3] != a.Region:
		d.errorIn(ap+".region", p, "aws.region %q is not the region of the arn (%s); leave it out", a.Region, strings.Split(dst.ARN, ":")[3])
	}
	switch {
	case a.Service == "":
	case dst.Type == TypeAgentCore:
		d.errorIn(ap+".service", p, "aws.service is not valid for type agentcore (it always signs as bedrock-agentcore)")
	case !serviceRE.MatchString(a.Service):
		d.errorIn(ap+".service", p, "aws.service %q: want a signing name like billing-mcp (lower-case letters, digits, '.', '_', '-'); leave it out to infer it from the host", a.Service)
	}
	if strings.ContainsFunc(a.Profile, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		d.errorIn(ap+".profile", p, "aws.profile contains a control character")
	}
	if a.AssumeRoleARN != "" && !roleARNRE.MatchString(a.AssumeRoleARN) {
		d.errorIn(ap+".assume_role_arn", p, "aws.assume_role_arn %q is not an IAM role ARN: want arn:aws:iam::ACCOUNT:role/NAME", a.AssumeRoleARN)
	}
	switch {
	case a.RoleSessionName == "":
	case !roleSessionRE.MatchString(a.RoleSessionName):
		d.errorIn(ap+".role_session_name", p, "aws.role_session_name %q: want 2 to 64 letters, digits or +=,.@_-", a.RoleSessionName)
	case a.AssumeRoleARN == "":
		d.errorIn(ap+".role_session_name", p, "aws.role_session_name needs aws.assume_role_arn")
	}
}

// runtimeARN is an AgentCore runtime ARN.
var runtimeARN = regexp.MustCompile(`^arn:aws(-[a-z]+)*:bedrock-agentcore:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:runtime/[A-Za-z][A-Za-z0-9_-]{0,99}$`)

func (d *decoder) validateAgentCore(dst *Destination, p string) {
	switch {
	case dst.ARN == "":
		if !d.failed[p+".arn"] {
			d.errorAt(p, "arn is required for type agentcore")
		}
	case !runtimeARN.MatchString(dst.ARN):
		d.errorIn(p+".arn", p, "arn %q is not an AgentCore runtime ARN: want arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/NAME", dst.ARN)
	}
	if strings.ContainsAny(dst.Qualifier, "/?#&= \t\r\n") {
		d.errorIn(p+".qualifier", p, "qualifier %q: want an endpoint name (letters, digits, _ and -)", dst.Qualifier)
	}
	d.oneOf(p+".session_mode", p, "unknown session_mode", dst.SessionMode, "", SessionModeSession, SessionModeIdentity, SessionModeRequest)
}

func (d *decoder) validateStdio(dst *Destination, p string) {
	if (len(dst.Command) == 0 || dst.Command[0] == "") && !d.failed[p+".command"] {
		d.errorIn(p+".command", p, "command is required for type stdio")
	}
	d.checkArgv(dst.Command, p, "command")
	d.checkArgv(dst.Args, p, "args")
	for _, key := range slices.Sorted(maps.Keys(dst.Env)) {
		if !isEnvName(key) {
			d.errorIn(p+".env."+key, p, "env: invalid name %q: want letters, digits and _, not starting with a digit", key)
		}
	}
	d.oneOf(p+".isolation", p, "unknown isolation", dst.Isolation, IsolationShared, IsolationSession)
}

// checkArgv reports an argument holding a NUL byte, which no program
// argument can carry. Any other byte is legal: no shell ever parses argv
// (the one-string command form is checked for shell syntax as it is
// decoded, see shellProblem).
func (d *decoder) checkArgv(argv []string, p, field string) {
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			d.errorIn(index(p+"."+field, i), p, "%s[%d] contains a NUL byte, which no program argument can hold", field, i)
			return
		}
	}
}

func (d *decoder) validateHTTP(dst *Destination, p string) {
	// Messages never quote the URL: it may hold a substituted secret.
	if dst.URL == "" {
		if !d.failed[p+".url"] {
			d.errorAt(p, "url is required for type %s", dst.Type)
		}
	} else if u, err := url.Parse(dst.URL); err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		d.errorIn(p+".url", p, "invalid url: %v", err)
	} else if u.Scheme != "http" && u.Scheme != "https" {
		d.errorIn(p+".url", p, "url must start with http:// or https://")
	} else if u.Host == "" {
		d.errorIn(p+".url", p, "url has no host")
	}
	for _, name := range slices.Sorted(maps.Keys(dst.Headers)) {
		if !isToken(name) {
			d.errorIn(p+".headers", p, "headers: invalid header name %q", name)
		} else if strings.ContainsAny(dst.Headers[name], "\r\n\x00") {
			d.errorIn(p+".headers", p, "headers: value of %s contains a line break or NUL", name)
		}
	}
	for i, name := range dst.ForwardHeaders {
		if !isToken(name) {
			d.errorIn(index(p+".forward_headers", i), p, "forward_headers: invalid header name %q", name)
		}
	}
}

// isToken reports whether s is an HTTP field name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func (d *decoder) validateNamespace(c *Config, ns *Namespace, p string) {
	d.validName(ns.Name, p)
	d.notDestination(c, ns.Name, p)
	for i, s := range ns.Servers {
		if _, ok := c.Destinations[s]; !ok && !d.disabled[s] {
			d.errorIn(index(p+".servers", i), p, "unknown destination %q in servers", s)
		}
	}
	for i, e := range ns.Extends {
		if _, ok := c.Namespaces[e]; !ok {
			d.errorIn(index(p+".extends", i), p, "unknown namespace %q in extends", e)
		}
	}
	d.oneOf(p+".tool_prefix", p, "unknown tool_prefix", ns.ToolPrefix, ToolPrefixAlways, ToolPrefixConflict, ToolPrefixNever)
	d.checkGlobs(ns.Tools.Allow, p, "tools.allow")
	d.checkGlobs(ns.Tools.Deny, p, "tools.deny")
	d.validateShaping(c, ns, p)
}

func (d *decoder) checkGlobs(globs []string, p, field string) {
	for i, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			d.errorIn(index(p+"."+field, i), p, "%s: invalid pattern %q: %v", field, g, err)
		}
	}
}

// checkCycles reports each cycle of namespace extends once, naming it.
func (d *decoder) checkCycles(c *Config) {
	const (
		unvisited = iota
		onStack
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		state[name] = onStack
		stack = append(stack, name)
		for _, e := range c.Namespaces[name].Extends {
			if _, ok := c.Namespaces[e]; !ok {
				continue
			}
			switch state[e] {
			case unvisited:
				visit(e)
			case onStack:
				cycle := append(slices.Clone(stack[slices.Index(stack, e):]), e)
				p := d.paths["namespaces."+name]
				d.errorIn(p+".extends", p, "extends cycle: %s", strings.Join(cycle, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
	}
	for _, name := range d.order["namespaces"] {
		if state[name] == unvisited {
			visit(name)
		}
	}
}

// notDestination reports a namespace or group named like a destination:
// both would be served at /{name}/mcp (and /{name}/sse).
func (d *decoder) notDestination(c *Config, name, p string) {
	if _, ok := c.Destinations[name]; ok {
		d.errorAt(p, "name %q is also a destination: both would be served at /%s/mcp; rename one (the view stays at /mcp/%s too)", name, name, name)
	}
}

func (d *decoder) validateGroup(c *Config, g *Group, p string) {
	d.validName(g.Name, p)
	d.notDestination(c, g.Name, p)
	if _, ok := c.Namespaces[g.Name]; ok {
		d.errorAt(p, "name %q is also a namespace", g.Name)
	}
	if len(g.Namespaces) == 0 {
		d.errorIn(p+".namespaces", p, "namespaces is empty")
	}
	for i, name := range g.Namespaces {
		ns, ok := c.Namespaces[name]
		switch {
		case !ok:
			d.errorIn(index(p+".namespaces", i), p, "unknown namespace %q", name)
		case ns.Isolated && !slices.Contains(g.Forced, name):
			d.errorIn(index(p+".namespaces", i), p, "namespace %q is isolated; write %q to include it anyway", name, "!"+name)
		}
	}
}
