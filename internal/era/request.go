package era

import (
	"bytes"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// modernRequest is what ModernOverLegacy reads of a 2026-07-28 request:
// found in one pass over its params and one over their _meta, so that the
// translated path costs no more scans than it must (each Lookup walks the
// object again).
type modernRequest struct {
	version []byte // raw _meta protocolVersion; nil when absent
	vs, ve  int    // its offsets in params
	caps    []byte // raw _meta clientCapabilities
	info    []byte // raw _meta clientInfo
	wantLog bool   // _meta carries a logLevel
	state   []byte // raw params.requestState
}

// readModern reads req's params (a request without params reads as
// empty). As in Lookup, a member given twice counts as its last. The
// _meta position is what the front noted already (jsonrpc.Message.MetaAt):
// only _meta is walked, once.
func readModern(req *jsonrpc.Message) modernRequest {
	var r modernRequest
	params := req.Params
	if mayHave(params, `State"`) { // the tail of "requestState": a capital, rare in JSON
		r.state = jsonrpc.Member(params, "requestState")
	}
	ms, me, ok := req.MetaAt()
	if !ok || me <= ms || params[ms] != '{' {
		return r
	}
	meta := params[ms:me]
	jsonrpc.EachMember(meta, func(k, v []byte) {
		switch string(k) {
		case mcp.MetaProtocolVersion:
			r.version = v
			r.vs = cap(params) - cap(v)
			r.ve = r.vs + len(v)
		case mcp.MetaClientCapabilities:
			r.caps = v
		case mcp.MetaClientInfo:
			r.info = v
		case mcp.MetaLogLevel:
			r.wantLog = true
		}
	})
	return r
}

// mayHave reports whether the JSON object obj may have a member whose key
// ends with tail (the key and its closing quote: `name"`): false only when
// neither tail nor a \u escape (which could spell the key) appears
// anywhere in obj. Both searches are vectorised, far cheaper than walking
// the object; the tail leaves out the opening quote, which a JSON text is
// full of, so the search stops rarely before a match.
func mayHave(obj []byte, tail string) bool {
	return bytes.Contains(obj, []byte(`\u`)) || bytes.Contains(obj, []byte(tail))
}

// check is mcp.CheckMeta on what readModern found.
func (r *modernRequest) check() *jsonrpc.Error { return mcp.CheckMetaValues(r.version, r.caps) }

// legacy is req as a legacy server gets it (see legacyRequest), made in
// out when it differs from req.
func (r *modernRequest) legacy(req, out *jsonrpc.Message) *jsonrpc.Message {
	if r.version == nil {
		return req
	}
	*out = jsonrpc.Message{ID: req.ID, Method: req.Method}
	if start, end, ok := memberCut(req.Params, mcp.MetaProtocolVersion, r.vs, r.ve); ok {
		out.Params = jsonrpc.Splice(req.Params, start, end, nil)
		// The cut was inside _meta: where it now is, so that the
		// upstream's look-up of the progress token there does not walk
		// the params again.
		ms, me, _ := req.MetaAt()
		out.SetMetaAt(ms, me-(end-start))
	} else {
		out.Params = withoutMeta(req.Params, mcp.MetaProtocolVersion) // an escaped key: the slow way
	}
	return out
}

// nameOf is what a parked call is bound to besides its method: params.name,
// or params.uri for resources/read ("" when not a string).
func nameOf(method string, params []byte) string {
	key := "name"
	if method == "resources/read" {
		key = "uri"
	}
	s, _ := jsonrpc.StringMember(params, key)
	return s
}

// stateToken is params.requestState when it is one Switchboard minted.
func (r *modernRequest) stateToken() (string, bool) {
	if r.state == nil {
		return "", false
	}
	s, ok := jsonrpc.String(r.state)
	return s, ok && isToken(s)
}
