package config

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A decoder walks a yaml.Node tree of one file, reporting every problem
// instead of stopping at the first. It checks types itself, because
// yaml.Node.Decode neither rejects unknown keys nor says where a value was.
type decoder struct {
	file      string                      // file name used in messages
	lookupEnv func(string) (string, bool) // the process environment
	errs      *[]*posError                // shared by the decoders of one load
	pos       map[string]int              // dotted path of every key and item decoded -> line
	secrets   map[string]Secrets          // secrets by destination, for ${VAR} in url and headers
	subst     []string                    // values substituted into url, headers and env
	order     map[string][]string         // "destinations", "namespaces", "groups" -> names in file order
	paths     map[string]string           // "destinations.x" etc. -> path used in messages
	disabled  map[string]bool             // imported servers left out
	imported  bool                        // the file is a client configuration
	secretsAt map[string]int              // secrets file: destination name -> line
	failed    map[string]bool             // paths whose value could not be decoded
	unset     map[string]*unsetRef        // "${NAME}" -> its first "is not set" error
	ent       Secrets                     // the secrets of the destination or client being decoded
}

// unsetRef is the error of an unset variable's first use; later uses add
// their lines to it.
type unsetRef struct {
	err   *posError
	msg   string   // the message without the other lines
	lines []string // the lines of the later uses
}

func newDecoder(file string, lookupEnv func(string) (string, bool), errs *[]*posError) *decoder {
	return &decoder{
		file:      file,
		lookupEnv: lookupEnv,
		errs:      errs,
		pos:       map[string]int{},
		order:     map[string][]string{},
		paths:     map[string]string{},
		disabled:  map[string]bool{},
		secretsAt: map[string]int{},
		failed:    map[string]bool{},
		unset:     map[string]*unsetRef{},
	}
}

// errorf reports a problem at node n (which may be nil) under path, and
// marks path as failed so that validation does not also call it missing.
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.failed[path] = true
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errorLine(line, path, format, args...)
}

// errorIn reports a problem under msgPath at the line recorded for linePath,
// or for its nearest recorded parent.
//
// A value already reported (an unset variable, a bad reference, a value of
// the wrong type: see errorf) gets no second error from validation: the
// first one says what to fix, a second would describe the placeholder.
func (d *decoder) errorIn(linePath, msgPath, format string, args ...any) {
	if d.failed[linePath] {
		return
	}
	d.errorLine(d.line(linePath), msgPath, format, args...)
}

// errorAt is errorIn with the message under the path whose line it has.
func (d *decoder) errorAt(path, format string, args ...any) {
	d.errorIn(path, path, format, args...)
}

// oneOf reports v as errorIn does, as `what "v": want a, b or c`, unless
// it is one of valid. An empty string in valid accepts an empty v and is
// not named in the message.
func (d *decoder) oneOf(linePath, msgPath, what, v string, valid ...string) {
	if slices.Contains(valid, v) {
		return
	}
	want := slices.DeleteFunc(slices.Clone(valid), func(s string) bool { return s == "" })
	d.errorIn(linePath, msgPath, "%s %q: want %s or %s", what, v, strings.Join(want[:len(want)-1], ", "), want[len(want)-1])
}

func (d *decoder) errorLine(line int, path, format string, args ...any) {
	*d.errs = append(*d.errs, &posError{file: d.file, line: line, path: path, msg: fmt.Sprintf(format, args...)})
}

// line returns the line recorded for path or its nearest recorded parent.
func (d *decoder) line(path string) int {
	for path != "" {
		if l, ok := d.pos[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// has reports whether the key at path was present in the file.
func (d *decoder) has(path string) bool {
	_, ok := d.pos[path]
	return ok
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// scalarKinds names the scalars of the YAML tags in type errors.
var scalarKinds = map[string]string{"!!str": "a string", "!!int": "an integer", "!!float": "a number", "!!bool": "a boolean", "!!null": "null"}

// describe names the kind of n for type errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return cmp.Or(scalarKinds[n.ShortTag()], n.ShortTag())
	}
	return "a document"
}

func (d *decoder) typeErr(n *yaml.Node, path, want string) {
	d.errorf(n, path, "expected %s, got %s", want, describe(n))
}

// each calls fn with every key/value pair of the mapping n, in file order,
// with the value's path. It reports non-scalar and duplicate keys, expands
// merge keys (<<) the way YAML defines them, and records the line of every
// key. A null n is an empty mapping. each returns false, after reporting,
// when n is neither.
func (d *decoder) each(n *yaml.Node, path string, fn func(key string, v *yaml.Node, kpath string)) bool {
	n = resolve(n)
	if isNull(n) {
		return true
	}
	if n.Kind != yaml.MappingNode {
		d.typeErr(n, path, "a mapping")
		return false
	}
	explicit := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.ShortTag() != "!!merge" {
			explicit[k.Value] = true
		}
	}
	m := &mergeState{explicit: explicit, seen: map[string]int{}, merged: map[*yaml.Node]bool{}}
	d.pairs(n, path, m, fn, 0)
	return true
}

// mergeState is the bookkeeping of one mapping's merge keys.
type mergeState struct {
	explicit map[string]bool     // keys the mapping itself sets
	seen     map[string]int      // keys delivered so far -> line
	merged   map[*yaml.Node]bool // mappings already merged in; merging one twice adds nothing
}

func (d *decoder) pairs(n *yaml.Node, path string, m *mergeState, fn func(string, *yaml.Node, string), depth int) {
	merged := depth > 0
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			d.merge(v, path, m, fn, depth+1)
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			d.errorf(k, path, "keys must be strings, got %s", describe(k))
			continue
		}
		key := k.Value
		if merged && m.explicit[key] {
			continue // the mapping's own key wins over a merged one
		}
		if first, dup := m.seen[key]; dup {
			if !merged {
				d.errorf(k, path, "duplicate key %q (first defined at line %d)", key, first)
			}
			continue
		}
		m.seen[key] = k.Line
		kpath := join(path, key)
		d.pos[kpath] = k.Line
		fn(key, v, kpath)
	}
}

func (d *decoder) merge(v *yaml.Node, path string, m *mergeState, fn func(string, *yaml.Node, string), depth int) {
	if depth > 32 {
		d.errorf(v, path, "merge keys nested too deeply")
		return
	}
	v = resolve(v)
	var sources []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{v}
	case yaml.SequenceNode:
		for _, s := range v.Content {
			if s = resolve(s); s.Kind != yaml.MappingNode {
				d.errorf(s, path, "merge (<<) values must be mappings, got %s", describe(s))
				continue
			}
			sources = append(sources, s)
		}
	default:
		d.errorf(v, path, "merge (<<) value must be a mapping or a list of mappings, got %s", describe(v))
	}
	for _, s := range sources {
		if !m.merged[s] {
			m.merged[s] = true
			d.pairs(s, path, m, fn, depth)
		}
	}
}

// items calls fn with every element of the sequence n and its path,
// recording the line of each. A null n is an empty list. items returns
// false, after reporting, when n is neither.
func (d *decoder) items(n *yaml.Node, path string, fn func(i int, v *yaml.Node, ipath string)) bool {
	n = resolve(n)
	if isNull(n) {
		return true
	}
	if n.Kind != yaml.SequenceNode {
		d.typeErr(n, path, "a list")
		return false
	}
	for i, v := range n.Content {
		ipath := index(path, i)
		d.pos[ipath] = v.Line
		fn(i, resolve(v), ipath)
	}
	return true
}

// unknown reports the key at kpath as not part of the schema, with the
// nearest known key when one is near enough to be a typo.
func (d *decoder) unknown(kpath, key string) {
	parent := strings.TrimSuffix(strings.TrimSuffix(kpath, key), ".")
	if s := suggestKey(parent, key); s != "" {
		d.errorLine(d.pos[kpath], parent, "unknown key %q (did you mean %s?)", key, s)
		return
	}
	d.errorLine(d.pos[kpath], parent, "unknown key %q", key)
}

// scope says how ${VAR} references in a value resolve.
type scope struct {
	secrets Secrets // consulted before the environment; nil for none
	record  bool    // substituted values are secrets (see SecretValues)
}

// interp expands the ${VAR} references in s, which is the value of node n,
// reporting bad and unset references at n.
func (d *decoder) interp(n *yaml.Node, path, s string, sc scope) string {
	if !strings.Contains(s, "$") {
		return s
	}
	out, subst, errs := expand(s, func(name string, envOnly bool) (string, bool) {
		if !envOnly {
			if v, ok := sc.secrets[name]; ok {
				return v, true
			}
		}
		return d.lookupEnv(name)
	})
	for _, e := range errs {
		ref, unset := strings.CutSuffix(e, " is not set")
		if first := d.unset[ref]; unset && first != nil {
			// The same variable again: one error, naming every line.
			d.failed[path] = true
			if n != nil {
				first.lines = append(first.lines, strconv.Itoa(n.Line))
				first.err.msg = first.msg + " (also used at line " + strings.Join(first.lines, ", ") + ")"
			}
			continue
		}
		d.errorf(n, path, "%s", e)
		if unset {
			d.unset[ref] = &unsetRef{err: (*d.errs)[len(*d.errs)-1], msg: e}
		}
	}
	if sc.record {
		d.subst = append(d.subst, subst...)
	}
	return out
}

// scalar returns the text of scalar n, expanded when it is a string, and
// whether it held a reference (which lets "${PORT}" stand for an integer).
// It reports and returns ok=false when n is not a scalar.
func (d *decoder) scalar(n *yaml.Node, path, want string, sc scope) (text string, ref, ok bool) {
	if n.Kind != yaml.ScalarNode {
		d.typeErr(n, path, want)
		return "", false, false
	}
	if n.ShortTag() != "!!str" {
		return n.Value, false, true
	}
	return d.interp(n, path, n.Value, sc), strings.Contains(n.Value, "${"), true
}

// The set* methods decode n into *p. A null n leaves *p unchanged, so the
// default stays; a value of the wrong type is reported and leaves *p
// unchanged too.

func (d *decoder) setString(p *string, n *yaml.Node, path string, sc scope) {
	if n = resolve(n); isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.typeErr(n, path, "a string")
		return
	}
	*p = d.interp(n, path, n.Value, sc)
}

// setScalar decodes the scalar n into *p: want names the type in errors,
// tags are the YAML tags it may have (a string holding a ${VAR} reference
// passes for any), and parse turns the text into the value or the error to
// report.
func setScalar[T any](d *decoder, p *T, n *yaml.Node, path, want string, tags []string, parse func(s, tag string) (T, error)) {
	if n = resolve(n); isNull(n) {
		return
	}
	s, ref, ok := d.scalar(n, path, want, scope{})
	if !ok {
		return
	}
	if !slices.Contains(tags, n.ShortTag()) && !ref {
		d.typeErr(n, path, want)
	} else if v, err := parse(s, n.ShortTag()); err != nil {
		d.errorf(n, path, "%v", err)
	} else {
		*p = v
	}
}

func (d *decoder) setBool(p *bool, n *yaml.Node, path string) {
	setScalar(d, p, n, path, "a boolean", []string{"!!bool"}, func(s, _ string) (bool, error) {
		b, err := strconv.ParseBool(s)
		return b, invalid(err != nil, "invalid boolean %q", s)
	})
}

func (d *decoder) setInt(p *int, n *yaml.Node, path string) {
	setScalar(d, p, n, path, "an integer", []string{"!!int"}, func(s, _ string) (int, error) {
		i, err := strconv.ParseInt(strings.TrimSpace(s), 0, strconv.IntSize)
		return int(i), invalid(err != nil, "invalid integer %q", s)
	})
}

// setFloat takes an integer or a float ("1" and "0.25" alike).
func (d *decoder) setFloat(p *float64, n *yaml.Node, path string) {
	setScalar(d, p, n, path, "a number", []string{"!!float", "!!int"}, func(s, _ string) (float64, error) {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		return f, invalid(err != nil || math.IsNaN(f), "invalid number %q", s)
	})
}

// setDuration takes a string like "30s", or the integer 0.
func (d *decoder) setDuration(p *time.Duration, n *yaml.Node, path string) {
	setScalar(d, p, n, path, `a duration like "30s"`, []string{"!!str", "!!int"}, func(s, tag string) (time.Duration, error) {
		if tag == "!!int" {
			i, err := strconv.ParseInt(s, 0, 64)
			return 0, invalid(err != nil || i != 0, "invalid duration %s: missing unit (write it like \"30s\")", s)
		}
		v, err := time.ParseDuration(strings.TrimSpace(s))
		return v, invalid(err != nil, "invalid duration %q (write it like \"30s\" or \"1m30s\")", s)
	})
}

func (d *decoder) setSize(p *int64, n *yaml.Node, path string) {
	setScalar(d, p, n, path, `a size like "16MiB"`, []string{"!!str", "!!int"}, func(s, _ string) (int64, error) { return parseSize(s) })
}

// invalid returns the error of format and args when bad, else nil.
func invalid(bad bool, format string, args ...any) error {
	if !bad {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func (d *decoder) setStrings(p *[]string, n *yaml.Node, path string, sc scope) {
	if n = resolve(n); isNull(n) {
		return
	}
	out := []string{}
	ok := d.items(n, path, func(_ int, v *yaml.Node, ipath string) {
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			d.typeErr(v, ipath, "a string")
			return
		}
		out = append(out, d.interp(v, ipath, v.Value, sc))
	})
	if ok {
		*p = out
	}
}

// setNameList is setStrings that also takes a single string as a one-item
// list (MCProxy writes "extends": "base").
func (d *decoder) setNameList(p *[]string, n *yaml.Node, path string) {
	if n = resolve(n); !isNull(n) && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		*p = []string{d.interp(n, path, n.Value, scope{})}
		return
	}
	d.setStrings(p, n, path, scope{})
}

func (d *decoder) setDurations(p *[]time.Duration, n *yaml.Node, path string) {
	if n = resolve(n); isNull(n) {
		return
	}
	out := []time.Duration{}
	ok := d.items(n, path, func(_ int, v *yaml.Node, ipath string) {
		var dur time.Duration
		if isNull(v) {
			d.typeErr(v, ipath, `a duration like "30s"`)
			return
		}
		d.setDuration(&dur, v, ipath)
		out = append(out, dur)
	})
	if ok {
		*p = out
	}
}

// setStringMap decodes a mapping of scalars, each taken as written (for env
// and header values, where `PORT: 8080` means "8080"), passing each key
// through canon (which may be nil) and reporting keys that collide after it.
func (d *decoder) setStringMap(p *map[string]string, n *yaml.Node, path string, sc scope, canon func(string) string) {
	if n = resolve(n); isNull(n) {
		return
	}
	out := map[string]string{}
	first := map[string]string{}
	ok := d.each(n, path, func(key string, v *yaml.Node, kpath string) {
		if canon != nil {
			c := canon(key)
			if prev, dup := first[c]; dup {
				d.errorf(v, path, "keys %q and %q are the same", prev, key)
				return
			}
			first[c] = key
			key = c
		}
		if v = resolve(v); isNull(v) {
			d.typeErr(v, kpath, "a string")
			return
		}
		out[key], _, _ = d.scalar(v, kpath, "a string", sc) // "" when reported
	})
	if ok {
		*p = out
	}
}

// parseSize parses a byte count: an integer, optionally followed by one of
// the units B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of
// 1024).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:])
	mult := map[string]int64{
		"": 1, "B": 1,
		"KB": 1e3, "MB": 1e6, "GB": 1e9,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	}[unit]
	v, err := strconv.ParseInt(num, 10, 64)
	if mult == 0 || err != nil {
		return 0, fmt.Errorf("invalid size %q (write it like 1048576 or \"16MiB\")", s)
	}
	if v > 0 && v > (1<<63-1)/mult || v < 0 && v < -(1<<63-1)/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return v * mult, nil
}
