package config

import (
	"cmp"
	"maps"
	"regexp"
	"slices"
	"time"
)

// Code mode of a namespace (`code_mode`).
const (
	CodeModeOff  = ""     // false or absent: no execute tool
	CodeModeOn   = "on"   // true: execute, search and inspect beside the tools
	CodeModeOnly = "only" // only: clients see just search, inspect and execute
)

// Sandbox defaults (a namespace's `sandbox` block).
const (
	DefaultSandboxTimeout     = 10 * time.Second
	DefaultSandboxMemory      = 64 << 20
	DefaultSandboxMaxCalls    = 1000
	DefaultSandboxMaxOutput   = 64 << 10
	DefaultSandboxConcurrency = 4
)

// ToolOverride reshapes one tool of one server in a namespace (an entry of
// `overrides`). Empty fields leave the server's own value.
type ToolOverride struct {
	// Name is the name the tool is exposed under, as written: no prefix is
	// added (`name`). The server's own name no longer reaches it.
	Name string `yaml:"name"`
	// Title and Description replace the server's (`title`, `description`).
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	// Hide removes the tool from the namespace: it is not listed and cannot
	// be called, directly or from a script (`hide`).
	Hide bool `yaml:"hide"`
	// Annotations are set on the tool's annotations, each key replacing the
	// server's value (`annotations`: readOnlyHint, destructiveHint,
	// idempotentHint, openWorldHint, title, or any other key).
	Annotations map[string]any `yaml:"annotations"`
}

// Sandbox bounds the scripts of a namespace's execute tool (`sandbox`).
type Sandbox struct {
	Timeout     time.Duration `yaml:"timeout"`     // wall time of one script (`timeout`)
	Memory      int64         `yaml:"memory"`      // heap growth allowed while a script runs (`memory`)
	MaxCalls    int           `yaml:"max_calls"`   // tool calls one script may make (`max_calls`)
	MaxOutput   int64         `yaml:"max_output"`  // printed output and result, each (`max_output`)
	Concurrency int           `yaml:"concurrency"` // scripts running at once in the namespace (`concurrency`)
}

// withDefaults fills the zero fields of s.
func (s Sandbox) withDefaults() Sandbox {
	s.Timeout = cmp.Or(s.Timeout, DefaultSandboxTimeout)
	s.Memory = cmp.Or(s.Memory, DefaultSandboxMemory)
	s.MaxCalls = cmp.Or(s.MaxCalls, DefaultSandboxMaxCalls)
	s.MaxOutput = cmp.Or(s.MaxOutput, DefaultSandboxMaxOutput)
	s.Concurrency = cmp.Or(s.Concurrency, DefaultSandboxConcurrency)
	return s
}

// customPrefixRE is the syntax of a custom prefix (`prefix: {server: mem}`).
var customPrefixRE = regexp.MustCompile(`^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$`)

// MaxCustomPrefix is the longest custom prefix.
const MaxCustomPrefix = 32

// toolNameRE is the syntax of an exposed tool name (an override's name).
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// boolAnnotations are the MCP tool annotations that take a boolean.
var boolAnnotations = []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

// validateShaping checks a namespace's prefix, overrides, code_mode and
// sandbox keys, then fills the sandbox defaults.
func (d *decoder) validateShaping(c *Config, ns *Namespace, p string) {
	var servers []string
	var walk func(string, map[string]bool)
	walk = func(n string, seen map[string]bool) {
		if seen[n] || c.Namespaces[n] == nil {
			return
		}
		seen[n] = true
		servers = append(servers, c.Namespaces[n].Servers...)
		for _, e := range c.Namespaces[n].Extends {
			walk(e, seen)
		}
	}
	walk(ns.Name, map[string]bool{})
	for _, server := range slices.Sorted(maps.Keys(ns.Prefix)) {
		pp := p + ".prefix." + server
		if !slices.Contains(servers, server) {
			d.errorIn(pp, p, "prefix: %q is not a server of the namespace", server)
		}
		switch v := ns.Prefix[server]; v {
		case ToolPrefixAlways, ToolPrefixConflict, ToolPrefixNever:
		default:
			if len(v) > MaxCustomPrefix || !customPrefixRE.MatchString(v) {
				d.errorIn(pp, p, "prefix.%s: %q is neither always, conflict, never nor a custom prefix "+
					"(1 to %d letters, digits, '-' or single '_')", server, v, MaxCustomPrefix)
			}
		}
	}
	exposed := map[string]string{} // override name -> server.tool that takes it
	for _, server := range slices.Sorted(maps.Keys(ns.Overrides)) {
		if !slices.Contains(servers, server) {
			d.errorIn(p+".overrides."+server, p, "overrides: %q is not a server of the namespace", server)
		}
		for _, tool := range slices.Sorted(maps.Keys(ns.Overrides[server])) {
			o := ns.Overrides[server][tool]
			op := p + ".overrides." + server + "." + tool
			if o.Name != "" {
				if !toolNameRE.MatchString(o.Name) {
					d.errorIn(op+".name", p, "overrides.%s.%s.name: %q is not a valid tool name (^[a-zA-Z0-9_-]{1,64}$)", server, tool, o.Name)
				}
				if first, dup := exposed[o.Name]; dup {
					d.errorIn(op+".name", p, "overrides.%s.%s.name: %q is also the name of %s", server, tool, o.Name, first)
				}
				exposed[o.Name] = server + "." + tool
			}
			for _, k := range slices.Sorted(maps.Keys(o.Annotations)) {
				v := o.Annotations[k]
				if _, isBool := v.(bool); slices.Contains(boolAnnotations, k) && !isBool {
					d.errorIn(op+".annotations."+k, p, "overrides.%s.%s.annotations.%s: expected a boolean, got %v", server, tool, k, v)
				}
				if _, isString := v.(string); k == "title" && !isString {
					d.errorIn(op+".annotations."+k, p, "overrides.%s.%s.annotations.title: expected a string, got %v", server, tool, v)
				}
			}
		}
	}
	if ns.sandboxSet = d.has(p + ".sandbox"); ns.sandboxSet && ns.CodeMode == CodeModeOff {
		d.errorIn(p+".sandbox", p, "sandbox is set but code_mode is off")
	}
	s := ns.Sandbox
	switch {
	case s.Timeout < 0:
		d.errorIn(p+".sandbox.timeout", p, "sandbox.timeout must be positive")
	case s.Memory < 0 || (s.Memory > 0 && s.Memory < 1<<20):
		d.errorIn(p+".sandbox.memory", p, "sandbox.memory must be at least 1MiB")
	case s.MaxCalls < 0:
		d.errorIn(p+".sandbox.max_calls", p, "sandbox.max_calls must be positive")
	case s.MaxOutput < 0 || (s.MaxOutput > 0 && s.MaxOutput < 1<<10):
		d.errorIn(p+".sandbox.max_output", p, "sandbox.max_output must be at least 1KiB")
	case s.Concurrency < 0:
		d.errorIn(p+".sandbox.concurrency", p, "sandbox.concurrency must be positive")
	}
	ns.Sandbox = s.withDefaults()
	if ns.CodeMode != CodeModeOff && c.Timeout > 0 && ns.Sandbox.Timeout >= c.Timeout {
		d.errorIn(p+".sandbox.timeout", p, "sandbox.timeout (%s) must be shorter than timeout (%s): the request would time out before the script",
			ns.Sandbox.Timeout, c.Timeout)
	}
}
