// Package jsonrpc implements the JSON-RPC 2.0 messages that MCP speaks, in the
// form a gateway needs: a message is decoded only as far as its envelope
// (jsonrpc, id, method, params, result, error), every member is kept as the
// raw bytes it arrived as, and re-encoding splices those bytes back together.
//
// Why not the go-sdk's jsonrpc package or encoding/json: a gateway touches
// every message but reads almost none of it. Decode scans the top-level
// object once, allocates one Message and copies nothing, so a 64 KiB tool
// result costs one pass over its bytes instead of a full unmarshal into
// interface values and a marshal back (BenchmarkDecode compares the two).
// Members that are read (a method name, a progress token) are looked up on
// demand with Lookup, and rewritten in place with Splice; params.name, read
// for nearly every call, and where params._meta is, looked at for every
// request, are noted in the decoding pass itself (ParamName, MetaAt).
// A message that must outlive the buffer it was decoded from is detached
// (Detach): copied once, into its wire form, which Encode then returns as
// it is, so a response crosses the gateway with one copy.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// Message is one JSON-RPC 2.0 message. Which fields are set tells its kind:
//
//	request:      Method != "" and ID != nil
//	notification: Method != "" and ID == nil
//	response:     Method == "" (Result or Error set; ID may be "null" for an
//	              error about an unreadable request)
//
// ID, Params, Result and Error hold raw JSON; they may alias the buffer the
// message was decoded from, so a Message must not outlive a buffer that is
// reused (copy the input first, or Detach the message).
type Message struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage

	// metaAt caches where params._meta is in Params (see LookupMeta);
	// off < 0 means absent. The cache is valid only while Params is the
	// slice it was computed for (metaOf, metaLen), so code that copies a
	// Message and replaces its Params never reads a stale position.
	metaAt  span
	metaOf  *byte
	metaLen int

	// wire, when not nil, is m's wire form as Detach made it, and wireAt
	// where ID, Params, Result and Error are in it; Encode and AppendTo use
	// it only while each member still is that slice and Method is
	// wireMethod (wireValid), so code that replaces a member never sends
	// stale bytes.
	wire       []byte
	wireMethod string
	wireAt     [4]span

	// nameAt is where params.name's value is in Params as Decode found it
	// (off < 0: the object has none), valid while Params is the slice it
	// was found in: starting at nameOf, nameLen long. See ParamName.
	nameAt  span
	nameOf  *byte
	nameLen int

	owned bool // wire came from DetachWith's get: see Release
}

// span is a place in a buffer: n bytes from off; off < 0 means none (a
// nil member). int32 keeps a Message small; larger places are not cached.
type span struct{ off, n int32 }

// spanOf returns where v (nil, or a slice of buf) is in buf, and false if
// that does not fit a span.
func spanOf(buf, v []byte) (span, bool) {
	if v == nil {
		return span{off: -1}, true
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(v))) - uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	if off < 0 || off > math.MaxInt32 || len(v) > math.MaxInt32 {
		return span{}, false
	}
	return span{int32(off), int32(len(v))}, true
}

// is reports whether v is the slice of buf that s places.
func (s span) is(buf, v []byte) bool {
	if s.off < 0 {
		return v == nil
	}
	return len(v) == int(s.n) && int(s.off) < len(buf) && unsafe.SliceData(v) == &buf[s.off]
}

// of returns the slice of buf that s places (nil for none).
func (s span) of(buf []byte) []byte {
	if s.off < 0 {
		return nil
	}
	return buf[s.off : s.off+s.n : s.off+s.n]
}

// Detach makes m independent of the buffer it was decoded from (Decode
// keeps slices of its input): its members are copied into one new buffer
// that is also m's wire form, which Encode and AppendTo then return
// without encoding again, as long as no member is replaced. Decoding in
// place and detaching what is kept costs one copy of a message, where
// decoding a copy and encoding it again for the client cost two.
func (m *Message) Detach() { m.DetachWith(nil) }

// DetachWith is Detach into a buffer get returns for the wire form's
// likely size (nil get: a new one). The message then owns that buffer
// (as long as its wire form is still in it): Release hands it back, for
// reuse once nothing reads the message.
func (m *Message) DetachWith(get func(n int) []byte) {
	var off [4][2]int // start and end of ID, Params, Result, Error in buf
	size := 64 + len(m.ID) + len(m.Method) + len(m.Params) + len(m.Result) + len(m.Error)
	var buf []byte
	if get != nil {
		buf = get(size)[:0]
	} else {
		buf = make([]byte, 0, size)
	}
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	member := func(i int, prefix string, v []byte) {
		if v == nil {
			return
		}
		buf = append(buf, prefix...)
		off[i][0] = len(buf)
		buf = append(buf, v...)
		off[i][1] = len(buf)
	}
	member(0, `,"id":`, m.ID)
	if m.Method != "" {
		buf = append(buf, `,"method":`...)
		buf = appendString(buf, m.Method)
	}
	member(1, `,"params":`, m.Params)
	member(2, `,"result":`, m.Result)
	member(3, `,"error":`, m.Error)
	buf = append(buf, '}')
	slice := func(i int, v []byte) []byte {
		if v == nil {
			return nil
		}
		return buf[off[i][0]:off[i][1]:off[i][1]]
	}
	named := m.nameValid() // nameAt is relative to Params: it moves with it
	m.ID, m.Params, m.Result, m.Error = slice(0, m.ID), slice(1, m.Params), slice(2, m.Result), slice(3, m.Error)
	if named {
		m.nameOf, m.nameLen = unsafe.SliceData(m.Params), len(m.Params)
	}
	if len(buf) > math.MaxInt32 {
		m.wire = nil // too large for spans: encoded again when sent
		return
	}
	for i, v := range [4][]byte{m.ID, m.Params, m.Result, m.Error} {
		m.wireAt[i], _ = spanOf(buf, v)
	}
	m.wire, m.wireMethod = buf, m.Method
	m.owned = get != nil
}

// Release returns the buffer DetachWith put m's wire form in, when m
// still holds its wire form there, and nil otherwise (m was detached by
// Detach, or a member was replaced since). m no longer owns it: the
// caller may reuse it once nothing reads m, nor anything Encode returned.
func (m *Message) Release() []byte {
	if !m.owned || !m.wireValid() {
		return nil
	}
	m.owned = false
	return m.wire
}

// wireValid reports whether m.wire is still m's wire form: every member
// is the very slice Detach set.
func (m *Message) wireValid() bool {
	return m.wire != nil && m.Method == m.wireMethod &&
		m.wireAt[0].is(m.wire, m.ID) && m.wireAt[1].is(m.wire, m.Params) &&
		m.wireAt[2].is(m.wire, m.Result) && m.wireAt[3].is(m.wire, m.Error)
}

// nameValid reports whether nameAt is about the current Params.
func (m *Message) nameValid() bool {
	return m.nameOf != nil && m.nameOf == unsafe.SliceData(m.Params) && m.nameLen == len(m.Params)
}

// LookupMeta finds params._meta[key], like Lookup(m.Params, "_meta", key),
// with offsets into m.Params. The position of _meta is remembered, so a
// message whose params are large (a file, an image) is scanned once however
// many _meta members are read. Not safe for concurrent use.
func (m *Message) LookupMeta(key string) (val []byte, start, end int, ok bool) {
	ms, me, ok := m.MetaAt()
	if !ok {
		return nil, 0, 0, false
	}
	meta := m.Params[ms:me]
	// A _meta without the key's bytes (and no escape) is not walked: a
	// traceparent's or a progress token's _meta rarely holds the other.
	if !strings.Contains(unsafe.String(unsafe.SliceData(meta), len(meta)), key) && bytes.IndexByte(meta, '\\') < 0 {
		return nil, 0, 0, false
	}
	v, s, e, ok := Lookup(meta, key)
	if !ok {
		return nil, 0, 0, false
	}
	return v, ms + s, ms + e, true
}

// MetaAt returns where params._meta's value (an object, or whatever else
// it holds) is in m.Params, and false when params has no _meta; found as
// Lookup(m.Params, "_meta") finds it, once (LookupMeta shares the
// position). Not safe for concurrent use.
func (m *Message) MetaAt() (start, end int, ok bool) {
	if len(m.Params) == 0 {
		return 0, 0, false
	}
	if m.metaOf != &m.Params[0] || m.metaLen != len(m.Params) {
		s, e := -1, 0
		if mayHaveMember(m.Params, `"_meta"`) {
			if _, fs, fe, found := Lookup(m.Params, "_meta"); found {
				s, e = fs, fe
			}
		}
		if !m.SetMetaAt(s, e) {
			return s, e, s >= 0 // params too large for a span: not cached
		}
	}
	if m.metaAt.off < 0 {
		return 0, 0, false
	}
	return int(m.metaAt.off), int(m.metaAt.off + m.metaAt.n), true
}

// SetMetaAt records that params._meta's value is m.Params[start:end] (no
// _meta when start < 0), as LookupMeta would find it: code that splices a
// _meta into a copy's params knows where it put it, and the copy's params
// (a file, an image) are then not walked to find it again.
// It reports false, caching nothing, when params are empty or too large
// for a span (2 GiB).
func (m *Message) SetMetaAt(start, end int) bool {
	if len(m.Params) == 0 {
		return false
	}
	if len(m.Params) > math.MaxInt32 {
		m.metaOf = nil
		return false
	}
	if start < 0 {
		m.metaAt = span{off: -1}
	} else {
		m.metaAt = span{int32(start), int32(end - start)}
	}
	m.metaOf, m.metaLen = &m.Params[0], len(m.Params)
	return true
}

// SpliceResult replaces Result[start:end] with v, in a new buffer (the old
// Result is not modified). A message whose wire form is valid (Detach)
// gets its new wire form in the same copy, so Encode and AppendTo still
// need no encoding: rewriting part of a response costs one copy, not two.
func (m *Message) SpliceResult(start, end int, v []byte) {
	if m.Result == nil || !m.wireValid() {
		m.Result = Splice(m.Result, start, end, v)
		return
	}
	rs := int(m.wireAt[2].off)
	buf := Splice(m.wire, rs+start, rs+end, v)
	if len(buf) > math.MaxInt32 {
		m.Result = Splice(m.Result, start, end, v) // too large for spans: encoded again when sent
		return
	}
	delta := int32(len(v) - (end - start))
	at := m.wireAt
	at[2].n += delta
	for i := range at {
		if i != 2 && at[i].off > int32(rs) {
			at[i].off += delta
		}
	}
	named := m.nameValid()
	m.ID, m.Params, m.Result, m.Error = at[0].of(buf), at[1].of(buf), at[2].of(buf), at[3].of(buf)
	if named {
		m.nameOf, m.nameLen = unsafe.SliceData(m.Params), len(m.Params)
	}
	m.wire, m.wireAt = buf, at
	m.owned = false // a new buffer; DetachWith's is left to the collector
}

// mayHaveMember reports whether obj may have a member whose key is the
// quoted key: false only when the key's bytes appear nowhere and no
// backslash does (an escaped key, "\u005fmeta", is the same key to a JSON
// parser). Both searches are vectorised and far cheaper than walking the
// object, so a message without the member (most of them) is not walked.
func mayHaveMember(obj []byte, quotedKey string) bool {
	return bytes.Contains(obj, []byte(quotedKey)) || bytes.IndexByte(obj, '\\') >= 0
}

// MetaString returns params._meta[key] if it is a string.
func (m *Message) MetaString(key string) (string, bool) {
	v, _, _, ok := m.LookupMeta(key)
	if !ok {
		return "", false
	}
	return unquote(v)
}

// IsRequest reports whether m is a request (expects a response).
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports whether m is a response (result or error).
func (m *Message) IsResponse() bool { return m.Method == "" }

// ErrBatch is returned by Decode for a JSON array: batches were removed from
// MCP in 2025-06-18 and Switchboard does not accept them.
var ErrBatch = errors.New("jsonrpc: batch requests are not supported (send one message per request)")

// Decode parses one JSON-RPC message. The returned Message aliases b.
// Errors are *Error values with code ParseError or InvalidRequest (ErrBatch
// for an array), suitable for sending back to the peer.
func Decode(b []byte) (*Message, error) {
	i := skipSpace(b, 0)
	if i < len(b) && b[i] == '[' {
		return nil, ErrBatch
	}
	if i >= len(b) || b[i] != '{' {
		if Valid(b) { // JSON, but not a request object
			return nil, &Error{Code: InvalidRequest, Message: "invalid request: not a JSON object"}
		}
		return nil, &Error{Code: ParseError, Message: "parse error: not a JSON object"}
	}
	m := &Message{}
	var version []byte
	var hasMethod, badMethod bool
	// params.name (tools/call, prompts/get) is noted while params is
	// skipped, so that ParamName costs no second pass over large arguments.
	pr := probe{in: "params", key: "name", at: -1}
	end, err := walkObject(b, i, 0, func(key, val []byte) error {
		switch string(key) {
		case "jsonrpc":
			version = val
		case "id":
			m.ID = val
		case "method":
			// A bad method is reported only once the whole input is
			// known to be JSON: invalid JSON is a ParseError.
			s, ok := method(val)
			m.Method, hasMethod, badMethod = s, true, !ok
		case "params":
			m.Params = val
		case "result":
			m.Result = val
		case "error":
			m.Error = val
		}
		return nil
	}, &pr)
	if err != nil {
		return nil, err
	}
	if skipSpace(b, end) != len(b) {
		return nil, &Error{Code: ParseError, Message: "parse error: trailing data after the message"}
	}
	if badMethod {
		return nil, &Error{Code: InvalidRequest, Message: "invalid request: method must be a string"}
	}
	if string(version) != `"2.0"` {
		return nil, &Error{Code: InvalidRequest, Message: `invalid request: "jsonrpc" must be "2.0"`}
	}
	switch {
	case hasMethod:
		if m.Method == "" {
			return nil, &Error{Code: InvalidRequest, Message: "invalid request: empty method"}
		}
		if m.Result != nil || m.Error != nil {
			return nil, &Error{Code: InvalidRequest, Message: "invalid request: a request cannot carry result or error"}
		}
		if m.ID != nil && !validID(m.ID) {
			return nil, &Error{Code: InvalidRequest, Message: "invalid request: id must be a string or an integer"}
		}
		if m.Params != nil && m.Params[0] != '{' && m.Params[0] != '[' {
			return nil, &Error{Code: InvalidRequest, Message: "invalid request: params must be an object or an array"}
		}
	case m.Result != nil || m.Error != nil:
		if m.Result != nil && m.Error != nil {
			return nil, &Error{Code: InvalidRequest, Message: "invalid response: both result and error"}
		}
		if m.ID == nil || (!validID(m.ID) && string(m.ID) != "null") {
			return nil, &Error{Code: InvalidRequest, Message: "invalid response: missing or invalid id"}
		}
	default:
		return nil, &Error{Code: InvalidRequest, Message: "invalid request: no method, result or error"}
	}
	if pr.at >= 0 && len(m.Params) > 0 && &m.Params[0] == &b[pr.at] {
		if at, ok := spanOf(m.Params, pr.val); ok { // none (off -1): the object has no name
			m.nameAt, m.nameOf, m.nameLen = at, &m.Params[0], len(m.Params)
		}
		// Where params._meta is was found in the same pass: MetaAt
		// need not search large params for it.
		if pr.meta != nil {
			ms := int(uintptr(unsafe.Pointer(unsafe.SliceData(pr.meta))) - uintptr(unsafe.Pointer(unsafe.SliceData(m.Params))))
			m.SetMetaAt(ms, ms+len(pr.meta))
		} else {
			m.SetMetaAt(-1, 0)
		}
	}
	return m, nil
}

// ParamName returns params.name when it is a JSON string (the tool of a
// tools/call, the prompt of a prompts/get), as StringMember(m.Params,
// "name") would: the last such member wins, escapes are decoded. For a
// message as Decode returned it, the member was found in the same pass
// that decoded it, so this costs no scan of the arguments.
func (m *Message) ParamName() (string, bool) {
	if !m.nameValid() {
		return StringMember(m.Params, "name")
	}
	if m.nameAt.off < 0 {
		return "", false
	}
	return unquote(m.nameAt.of(m.Params))
}

// method returns the string a raw JSON method name holds, without
// allocating for the methods MCP defines (every request and notification
// names one, on the hot path both ways).
func method(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		switch string(raw[1 : len(raw)-1]) { // no allocation: compared, not kept
		case "tools/call":
			return "tools/call", true
		case "tools/list":
			return "tools/list", true
		case "notifications/progress":
			return "notifications/progress", true
		case "notifications/message":
			return "notifications/message", true
		case "notifications/cancelled":
			return "notifications/cancelled", true
		case "notifications/initialized":
			return "notifications/initialized", true
		case "resources/read":
			return "resources/read", true
		case "resources/list":
			return "resources/list", true
		case "prompts/get":
			return "prompts/get", true
		case "prompts/list":
			return "prompts/list", true
		case "ping":
			return "ping", true
		case "initialize":
			return "initialize", true
		}
	}
	return unquote(raw)
}

// validID reports whether id is a JSON string or an integer.
func validID(id []byte) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		return true // eachMember checked the string
	}
	for i, c := range id {
		if c == '-' && i == 0 && len(id) > 1 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Encode returns the wire form of m (no trailing newline).
//
// The result must not be modified: for a detached message it is the
// message's own wire buffer.
func (m *Message) Encode() []byte {
	if m.wireValid() {
		return m.wire
	}
	// 64 is the envelope around the members when all are present:
	// {"jsonrpc":"2.0" ,"id": ,"method":"" ,"params": ,"result": ,"error": }
	return m.AppendTo(make([]byte, 0, 64+len(m.ID)+len(m.Method)+len(m.Params)+len(m.Result)+len(m.Error)))
}

// AppendTo appends the wire form of m to dst.
func (m *Message) AppendTo(dst []byte) []byte {
	if m.wireValid() {
		return append(dst, m.wire...)
	}
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	if m.ID != nil {
		dst = append(dst, `,"id":`...)
		dst = append(dst, m.ID...)
	}
	if m.Method != "" {
		dst = append(dst, `,"method":`...)
		dst = appendString(dst, m.Method)
	}
	if m.Params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, m.Params...)
	}
	if m.Result != nil {
		dst = append(dst, `,"result":`...)
		dst = append(dst, m.Result...)
	}
	if m.Error != nil {
		dst = append(dst, `,"error":`...)
		dst = append(dst, m.Error...)
	}
	return append(dst, '}')
}

// String returns the wire form; for logs and tests.
func (m *Message) String() string { return string(m.Encode()) }

// IntID returns the raw JSON of an integer id.
func IntID(n int64) json.RawMessage { return strconv.AppendInt(nil, n, 10) }

// ParseIntID returns the integer an id holds, if it is a plain integer.
func ParseIntID(id json.RawMessage) (int64, bool) {
	if len(id) == 0 || len(id) > 19 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	return n, err == nil
}

// NewRequest builds a request; params must be raw JSON or nil.
func NewRequest(id json.RawMessage, method string, params json.RawMessage) *Message {
	return &Message{ID: id, Method: method, Params: params}
}

// NewNotification builds a notification.
func NewNotification(method string, params json.RawMessage) *Message {
	return &Message{Method: method, Params: params}
}

// NewResult builds a success response.
func NewResult(id json.RawMessage, result json.RawMessage) *Message {
	if result == nil {
		result = json.RawMessage("{}")
	}
	return &Message{ID: id, Result: result}
}

// NewError builds an error response. A nil id becomes null.
func NewError(id json.RawMessage, e *Error) *Message {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(e)
	return &Message{ID: id, Error: b}
}

// Marshal is json.Marshal for values known to encode (maps, structs of plain
// fields); it panics on failure, which is a programming error.
func Marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("jsonrpc: marshal %T: %v", v, err))
	}
	return b
}

// ErrorOf decodes the error member of a response; nil for a success.
func (m *Message) ErrorOf() *Error {
	if m.Error == nil {
		return nil
	}
	var e Error
	if err := json.Unmarshal(m.Error, &e); err != nil {
		return &Error{Code: InternalError, Message: "malformed error object"}
	}
	return &e
}

// LargestMember returns the length of m's largest member among params,
// result and error: whether AppendAround would hand one out.
func (m *Message) LargestMember() int {
	return max(len(m.Params), len(m.Result), len(m.Error))
}

// AppendAround appends m's wire form to dst as AppendTo does, except for
// its largest member when that has at least min bytes (the params of a
// large request, the result of a large response): that member is not
// copied but returned as big, and belongs at out[at:], between out[:at]
// and out[at:]. A writer sends out[:at], big and out[at:] in turn, and
// the payload goes from the buffer it arrived in to the writer without a
// copy. With no member that large, big is nil and out is AppendTo's.
func (m *Message) AppendAround(dst []byte, min int) (out, big []byte, at int) {
	members := [3][]byte{m.Params, m.Result, m.Error}
	k := -1
	for i, v := range members {
		if len(v) >= min && (k < 0 || len(v) > len(members[k])) {
			k = i
		}
	}
	if k < 0 {
		return m.AppendTo(dst), nil, 0
	}
	big = members[k]
	if m.wireValid() {
		s := m.wireAt[1+k]
		out = append(dst, m.wire[:s.off]...)
		at = len(out)
		return append(out, m.wire[s.off+s.n:]...), big, at
	}
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	if m.ID != nil {
		dst = append(dst, `,"id":`...)
		dst = append(dst, m.ID...)
	}
	if m.Method != "" {
		dst = append(dst, `,"method":`...)
		dst = appendString(dst, m.Method)
	}
	for i, prefix := range [3]string{`,"params":`, `,"result":`, `,"error":`} {
		if members[i] == nil {
			continue
		}
		dst = append(dst, prefix...)
		if i == k {
			at = len(dst)
			continue
		}
		dst = append(dst, members[i]...)
	}
	return append(dst, '}'), big, at
}
