// Package mcpheader is the header codec of MCP's Streamable HTTP transport
// (2026-07-28) that its front and its client share: the =?base64?…?=
// encoding of Mcp-Name and Mcp-Param-* values, and the Mcp-Param-* headers
// of SEP-2243, bound to a tool's arguments by the x-mcp-header annotations
// of its inputSchema ([ExtractBindings]): the client sends them
// ([ParamHeaderValues]), the front checks them ([ValidateParamHeaders]).
package mcpheader

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// SEP-2243 custom headers. The upstream behind Switchboard is a stdio
// process that never sees HTTP headers, so Switchboard validates the
// Mcp-Param-{Name} headers of a 2026-07-28 tools/call itself, with the same
// semantics as the go-sdk server (mcp/streamable_headers.go,
// validateParamHeaders).
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// ParamBinding ties one (possibly nested) property of a tool's inputSchema
// to the header that mirrors it: the argument at Path (property names,
// outermost first) travels as Mcp-Param-{Header}.
type ParamBinding struct {
	Path   []string
	Header string
}

// ExtractBindings returns a binding for every property of inputSchema,
// at any depth reached through "properties", that carries a non-empty
// string x-mcp-header annotation. Bindings are ordered by path. A schema
// that is not an object, or has no annotations, gives nil.
func ExtractBindings(inputSchema json.RawMessage) []ParamBinding {
	return collectBindings(inputSchema, nil, nil)
}

// collectBindings walks schema's properties. Each property is read on its
// own, so one odd sibling (a "type" array, say) does not hide the
// annotations of the others.
func collectBindings(schema json.RawMessage, prefix []string, out []ParamBinding) []ParamBinding {
	props := jsonrpc.Member(schema, "properties")
	if props == nil {
		return out
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(props, &m); err != nil {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		raw := m[name]
		path := append(append(make([]string, 0, len(prefix)+1), prefix...), name)
		if hv := jsonrpc.Member(raw, "x-mcp-header"); hv != nil {
			var header string
			if err := json.Unmarshal(hv, &header); err == nil && header != "" {
				out = append(out, ParamBinding{Path: path, Header: header})
			}
		}
		out = collectBindings(raw, path, out)
	}
	return out
}

// ValidateParamHeaders checks each binding: an argument that is absent or
// null must come without its header; a present one needs the header, whose
// (base64-decoded) value must equal the argument — strings exactly,
// booleans as "true"/"false", integers numerically.
func ValidateParamHeaders(header http.Header, params json.RawMessage, bindings []ParamBinding) error {
	if len(bindings) == 0 {
		return nil
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil
	}
	var args map[string]json.RawMessage
	if raw, ok := p["arguments"]; ok {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil // arguments is not an object: nothing to compare with
		}
	}
	for _, b := range bindings {
		full := mcp.HeaderParamPrefix + b.Header
		path := strings.Join(b.Path, ".")
		hv := header.Get(full)
		arg, exists := lookupArgument(args, b.Path)
		if !exists || string(arg) == "null" {
			if hv != "" {
				return fmt.Errorf("header mismatch: unexpected %s header for absent or null parameter %q", full, path)
			}
			continue
		}
		if hv == "" {
			return fmt.Errorf("header mismatch: missing %s header for parameter %q", full, path)
		}
		decoded, ok := DecodeHeaderValue(hv)
		if !ok {
			return fmt.Errorf("header mismatch: %s header contains invalid Base64 encoding", full)
		}
		body := primitiveOf(arg)
		if body == nil {
			return fmt.Errorf("header mismatch: %s header present but body parameter %q is not a primitive type", full, path)
		}
		if !primitiveEqual(decoded, body) {
			return fmt.Errorf("header mismatch: %s header value '%s' does not match body value", full, hv)
		}
	}
	return nil
}

// lookupArgument follows path through nested argument objects. Duplicate
// keys resolve to the last one, as the upstream's JSON decoder sees them.
func lookupArgument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	if len(path) == 0 {
		return nil, false
	}
	cur, ok := args[path[0]]
	if !ok {
		return nil, false
	}
	for _, key := range path[1:] {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			return nil, false
		}
		if cur, ok = obj[key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// The integers a header can carry: those an IEEE-754 double holds exactly.
const (
	maxSafeInteger = 1<<53 - 1
	minSafeInteger = -(1<<53 - 1)
)

// primitiveOf returns the string, bool or int64 a JSON argument holds; nil
// for anything else (objects, arrays, fractions, integers beyond 2^53).
func primitiveOf(raw json.RawMessage) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	switch v := v.(type) {
	case string, bool:
		return v
	case float64:
		if i, ok := safeInteger(v); ok {
			return i
		}
	}
	return nil
}

// safeInteger returns f as an integer when it is one a header can carry.
func safeInteger(f float64) (int64, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f < minSafeInteger || f > maxSafeInteger {
		return 0, false
	}
	return int64(f), true
}

// primitiveEqual reports whether the decoded header value equals the body
// value.
func primitiveEqual(s string, body any) bool {
	switch v := body.(type) {
	case int64:
		f, err := strconv.ParseFloat(s, 64)
		i, ok := safeInteger(f)
		return err == nil && ok && i == v
	case bool:
		return s == strconv.FormatBool(v)
	case string:
		return s == v
	}
	return false
}

// DecodeHeaderValue undoes the =?base64?…?= wrapper of an Mcp-Name or
// Mcp-Param-* value (standard alphabet, padding required); a value without
// both markers is literal. ok is false for a wrapped value that is not
// valid base64.
func DecodeHeaderValue(v string) (string, bool) {
	enc, ok := strings.CutPrefix(v, base64Prefix)
	if !ok {
		return v, true
	}
	if enc, ok = strings.CutSuffix(enc, base64Suffix); !ok {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// EncodeHeaderValue applies the 2026-07-28 encoding of Mcp-Name and
// Mcp-Param-* values: a value that is not header-safe (non-ASCII, control
// characters, leading or trailing whitespace, or one that looks encoded)
// is sent as =?base64?…?=.
func EncodeHeaderValue(v string) string {
	safe := true
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			safe = false
			break
		}
	}
	if safe && v != "" {
		first, last := v[0], v[len(v)-1]
		if first == ' ' || first == '\t' || last == ' ' || last == '\t' ||
			(strings.HasPrefix(v, base64Prefix) && strings.HasSuffix(v, base64Suffix)) {
			safe = false
		}
	}
	if safe {
		return v
	}
	return base64Prefix + base64.StdEncoding.EncodeToString([]byte(v)) + base64Suffix
}

// ParamHeaderValues returns the Mcp-Param-* headers a 2026-07-28 tools/call
// with these params carries under the tool's bindings (SEP-2243): each
// primitive argument as a string, Base64-wrapped when not header-safe.
// Absent, null and non-primitive arguments get no header.
func ParamHeaderValues(params json.RawMessage, bindings []ParamBinding) http.Header {
	if len(bindings) == 0 {
		return nil
	}
	var p struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Arguments == nil {
		return nil
	}
	h := http.Header{}
	for _, b := range bindings {
		arg, ok := lookupArgument(p.Arguments, b.Path)
		if !ok || string(arg) == "null" {
			continue
		}
		var s string
		switch v := primitiveOf(arg).(type) {
		case string:
			s = v
		case bool:
			s = strconv.FormatBool(v)
		case int64:
			s = strconv.FormatInt(v, 10)
		default:
			continue
		}
		h.Set(mcp.HeaderParamPrefix+b.Header, EncodeHeaderValue(s))
	}
	return h
}
