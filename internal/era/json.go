package era

import (
	"encoding/json"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// skipWS returns the index of the first non-space byte of b at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// skipWSBack returns the index of the last non-space byte of b at or before
// i (-1 when there is none).
func skipWSBack(b []byte, i int) int {
	for i >= 0 && isWS(b[i]) {
		i--
	}
	return i
}

// prependMembers inserts members (`"k":v,"k2":v2`, no braces) at the start
// of the JSON object obj and returns the new object. A nil, empty or
// non-object obj becomes {members}.
func prependMembers(obj []byte, members []byte) []byte {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		out := make([]byte, 0, len(members)+2)
		out = append(out, '{')
		out = append(out, members...)
		return append(out, '}')
	}
	j := skipWS(obj, i+1)
	empty := j < len(obj) && obj[j] == '}'
	out := make([]byte, 0, len(obj)+len(members)+1)
	out = append(out, obj[:i+1]...)
	out = append(out, members...)
	if !empty {
		out = append(out, ',')
	}
	return append(out, obj[i+1:]...)
}

// withMeta returns params with the given _meta members (`"k":v,…`) added
// in front of its own _meta members (creating _meta when absent). Members
// the params already carry with the same key are left as they are and come
// after, so a JSON parser that keeps the last duplicate keeps the client's.
func withMeta(params []byte, members []byte) []byte {
	if _, s, e, ok := jsonrpc.Lookup(params, "_meta"); ok {
		return jsonrpc.Splice(params, s, e, prependMembers(params[s:e], members))
	}
	field := make([]byte, 0, len(members)+10)
	field = append(field, `"_meta":{`...)
	field = append(field, members...)
	field = append(field, '}')
	return prependMembers(params, field)
}

// withoutMeta returns params with the named _meta keys removed (the
// original when none is there). It decodes only _meta.
func withoutMeta(params []byte, keys ...string) []byte {
	raw, s, e, ok := jsonrpc.Lookup(params, "_meta")
	if !ok {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) != nil {
		return params
	}
	n := len(meta)
	for _, k := range keys {
		delete(meta, k)
	}
	if len(meta) == n {
		return params
	}
	return jsonrpc.Splice(params, s, e, jsonrpc.Marshal(meta))
}

// withoutMembers returns obj without its top-level members keys (decoding
// the object once); the original when it has none of them.
func withoutMembers(obj []byte, keys ...string) []byte {
	if !slices.ContainsFunc(keys, func(k string) bool {
		_, _, _, ok := jsonrpc.Lookup(obj, k)
		return ok
	}) {
		return obj
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return obj
	}
	for _, k := range keys {
		delete(m, k)
	}
	return jsonrpc.Marshal(m)
}

func result(req *jsonrpc.Message, res json.RawMessage) *session.Answer {
	return session.NewAnswer(jsonrpc.NewResult(req.ID, res))
}

func failure(req *jsonrpc.Message, e *jsonrpc.Error) *session.Answer {
	return session.NewAnswer(jsonrpc.NewError(req.ID, e))
}

// memberCut returns the bytes of the member key whose value spans obj[s:e]
// (offsets from a Lookup), with the comma that separated it: obj[start:end].
// ok is false when the bytes before the value are not "key": literally (an
// escaped key).
func memberCut(obj []byte, key string, s, e int) (start, end int, ok bool) {
	i := skipWSBack(obj, s-1)
	if i < 0 || obj[i] != ':' {
		return 0, 0, false
	}
	i = skipWSBack(obj, i-1)
	ks := i - len(key) - 1 // the opening quote of "key"
	if ks < 0 || obj[ks] != '"' || obj[i] != '"' || string(obj[ks+1:i]) != key {
		return 0, 0, false
	}
	start, end = ks, e
	if j := skipWS(obj, e); j < len(obj) && obj[j] == ',' {
		end = j + 1 // "key":v, → gone with its comma
	} else {
		if k := skipWSBack(obj, ks-1); k >= 0 && obj[k] == ',' {
			start = k // ,"key":v (the last member) → gone with the comma before
		}
	}
	return start, end, true
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
