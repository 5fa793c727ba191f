package era

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

func TestWithMeta(t *testing.T) {
	add := []byte(`"a":1,"b":"x"`)
	for _, tc := range []struct{ in, want string }{
		{``, `{"_meta":{"a":1,"b":"x"}}`},
		{`{}`, `{"_meta":{"a":1,"b":"x"}}`},
		{` { } `, ` {"_meta":{"a":1,"b":"x"} } `},
		{`{"name":"t"}`, `{"_meta":{"a":1,"b":"x"},"name":"t"}`},
		{`{"name":"t","_meta":{}}`, `{"name":"t","_meta":{"a":1,"b":"x"}}`},
		{`{"_meta":{"progressToken":3},"name":"t"}`, `{"_meta":{"a":1,"b":"x","progressToken":3},"name":"t"}`},
	} {
		got := string(withMeta([]byte(tc.in), add))
		if got != tc.want {
			t.Errorf("withMeta(%q) = %s; want %s", tc.in, got, tc.want)
		}
	}
}

func TestWithoutMeta(t *testing.T) {
	in := []byte(`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1}}`)
	got := withoutMeta(in, mcp.MetaProtocolVersion)
	if v := jsonrpc.Member(got, "_meta", mcp.MetaProtocolVersion); v != nil {
		t.Errorf("protocolVersion still there: %s", got)
	}
	if v := jsonrpc.Member(got, "_meta", "progressToken"); string(v) != "1" {
		t.Errorf("progressToken lost: %s", got)
	}
	if same := withoutMeta([]byte(`{"name":"t"}`), mcp.MetaProtocolVersion); string(same) != `{"name":"t"}` {
		t.Errorf("no _meta: got %s", same)
	}
}

func TestAmendResult(t *testing.T) {
	for _, tc := range []struct{ method, in, want string }{
		{"tools/call", `{"content":[]}`, `{"resultType":"complete","content":[]}`},
		{"tools/call", `{ }`, `{"resultType":"complete" }`},
		{"tools/call", `{"content":[],"resultType":"complete"}`, `{"content":[],"resultType":"complete"}`},
		// A legacy server's own MRTR result (a dual-era SDK shim).
		{"tools/call", `{"inputRequests":{"k":{}},"requestState":"s"}`, `{"resultType":"input_required","inputRequests":{"k":{}},"requestState":"s"}`},
		{"tools/call", `{"resultType":"input_required","inputRequests":{}}`, `{"resultType":"input_required","inputRequests":{}}`},
		{"tools/list", `{"tools":[],"resultType":"complete"}`, `{"ttlMs":0,"cacheScope":"private","tools":[],"resultType":"complete"}`},
		{"tools/list", `{"tools":[],"ttlMs":5,"cacheScope":"public"}`, `{"resultType":"complete","tools":[],"ttlMs":5,"cacheScope":"public"}`},
		// A key given escaped is the same key.
		{"tools/call", `{"result\u0054ype":"complete"}`, `{"result\u0054ype":"complete"}`},
	} {
		if got := string(amendResult([]byte(tc.in), tc.method)); got != tc.want {
			t.Errorf("amendResult(%s, %s) = %s; want %s", tc.in, tc.method, got, tc.want)
		}
		// The same on a detached response, which stays ready to write.
		m, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":7,"result":` + tc.in + `}`))
		if err != nil {
			t.Fatal(err)
		}
		m.Detach()
		amendResponse(m, tc.method)
		if string(m.Result) != tc.want || string(m.Encode()) != `{"jsonrpc":"2.0","id":7,"result":`+tc.want+`}` {
			t.Errorf("amendResponse(%s, %s): result %s, encoded %s", tc.in, tc.method, m.Result, m.Encode())
		}
	}
}

func TestReadModern(t *testing.T) {
	params := `{"name":"a","_meta":{"` + mcp.MetaProtocolVersion + `":"2026-07-28","` + mcp.MetaClientCapabilities + `":{"sampling":{}},"` +
		mcp.MetaClientInfo + `":{"name":"c"},"` + mcp.MetaLogLevel + `":"info"},"requestState":"sb1.x","name":"b"}`
	r := readModern(jsonrpc.NewRequest(json.RawMessage(`1`), "tools/call", json.RawMessage(params)))
	if r.check() != nil || string(r.caps) != `{"sampling":{}}` || string(r.info) != `{"name":"c"}` || !r.wantLog || nameOf("tools/call", []byte(params)) != "b" {
		t.Fatalf("read %+v", r)
	}
	if tok, ok := r.stateToken(); !ok || tok != "sb1.x" {
		t.Fatalf("stateToken = %q, %v", tok, ok)
	}
	if params[r.vs:r.ve] != `"2026-07-28"` {
		t.Fatalf("version offsets [%d:%d] = %s", r.vs, r.ve, params[r.vs:r.ve])
	}
	// resources/read is bound to its uri; a _meta given twice counts as
	// the last, as in Lookup.
	read := `{"uri":"u","name":"n","_meta":{"` + mcp.MetaProtocolVersion + `":"2026-07-28"},"_meta":{}}`
	r = readModern(jsonrpc.NewRequest(json.RawMessage(`1`), "resources/read", json.RawMessage(read)))
	if name := nameOf("resources/read", []byte(read)); name != "u" || r.check() == nil {
		t.Fatalf("resources/read: name %q, check %v", name, r.check())
	}
}

// FuzzWithMeta: whatever params a client sends, the _meta members added are
// found afterwards and valid JSON stays valid.
func FuzzWithMeta(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"a":1}`, `{"_meta":{}}`, `{"_meta":{"x":[1,2]},"b":{"_meta":1}}`, `[]`, `"s"`, ` {  } `, `{"_meta":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := withMeta([]byte(in), []byte(`"`+mcp.MetaProtocolVersion+`":"2026-07-28"`))
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &obj) != nil {
			return // not an object: anything goes, but no panic
		}
		if m := jsonrpc.Member([]byte(in), "_meta"); m != nil && (len(m) == 0 || m[0] != '{') {
			return // a _meta that is not an object is the client's error
		}
		if !json.Valid(out) {
			t.Fatalf("withMeta(%q) = %q: invalid JSON", in, out)
		}
		if v, _ := jsonrpc.StringMember(out, "_meta", mcp.MetaProtocolVersion); v != "2026-07-28" {
			t.Fatalf("withMeta(%q) = %q: member not found", in, out)
		}
	})
}

func TestClassify(t *testing.T) {
	res := func(r string) *jsonrpc.Message { return jsonrpc.NewResult(json.RawMessage(`1`), json.RawMessage(r)) }
	errm := func(code int, data string) *jsonrpc.Message {
		e := &jsonrpc.Error{Code: code, Message: "x"}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return jsonrpc.NewError(json.RawMessage(`1`), e)
	}
	for _, tc := range []struct {
		name string
		m    *jsonrpc.Message
		want Era
	}{
		{"modern only", res(`{"supportedVersions":["2026-07-28"]}`), Modern},
		{"dual", res(`{"supportedVersions":["2026-07-28","2025-11-25"]}`), Dual},
		{"legacy discover (go-sdk with sessions)", res(`{"supportedVersions":["2025-11-25","2025-06-18"]}`), Legacy},
		{"method not found", errm(jsonrpc.MethodNotFound, ""), Legacy},
		{"header mismatch", errm(jsonrpc.HeaderMismatch, ""), Modern},
		{"unsupported version naming 2026", errm(jsonrpc.UnsupportedProtocolVersion, `{"supported":["2026-07-28"]}`), Modern},
		{"unsupported version, legacy only", errm(jsonrpc.UnsupportedProtocolVersion, `{"supported":["2025-11-25"]}`), Legacy},
		{"http 400 without a modern body", errm(mcp.CodeUpstreamUnavailable, ""), Legacy},
	} {
		got, _, err := classify(tc.m)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, _, err := classify(jsonrpc.NewError(json.RawMessage(`1`), jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "upstream unreachable: refused"))); err == nil {
		t.Errorf("an unreachable server: want an error (nothing cached)")
	}
}

func TestDetectorCachesAndForgets(t *testing.T) {
	var probes atomic.Int32
	d := NewDetector(func(context.Context) (Era, error) { probes.Add(1); return Legacy, nil })
	for range 3 {
		if e, err := d.Era(context.Background()); err != nil || e != Legacy {
			t.Fatalf("Era = %v, %v", e, err)
		}
	}
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d probes; want 1 (cached)", n)
	}
	d.Forget()
	if d.Known() != Unknown {
		t.Fatalf("Known after Forget = %v", d.Known())
	}
	_, _ = d.Era(context.Background())
	if n := probes.Load(); n != 2 {
		t.Fatalf("%d probes after Forget; want 2", n)
	}
	p := Pinned(Modern)
	p.Forget()
	if p.Known() != Modern {
		t.Fatalf("a pinned detector forgot: %v", p.Known())
	}
}

// fakeBackend and fakeCall record what the parked-state store does to them.
type fakeBackend struct {
	left      atomic.Int32
	responded []*jsonrpc.Message
}

func (b *fakeBackend) Call(context.Context, *jsonrpc.Message) (session.Call, error) { return nil, nil }
func (b *fakeBackend) Notify(context.Context, *jsonrpc.Message) error               { return nil }
func (b *fakeBackend) Respond(_ context.Context, r *jsonrpc.Message) error {
	b.responded = append(b.responded, r)
	return nil
}
func (b *fakeBackend) Leave() { b.left.Add(1) }

// fakeCall is an upstream call the test feeds through q.
type fakeCall struct {
	q         jsonrpc.Queue
	abandoned atomic.Int32
	parked    atomic.Bool
}

func (c *fakeCall) Poll() (*jsonrpc.Message, bool) { return c.q.Poll() }
func (c *fakeCall) Ready() <-chan struct{}         { return c.q.Ready() }
func (c *fakeCall) LongLived() bool                { return false }
func (c *fakeCall) Abandon(bool)                   { c.abandoned.Add(1) }
func (c *fakeCall) SetParked(on bool)              { c.parked.Store(on) }
func newFakeCall() *fakeCall                       { c := &fakeCall{}; c.q.Init(4); return c }
func serverReq(id, method string) *jsonrpc.Message {
	return jsonrpc.NewRequest(json.RawMessage(id), method, json.RawMessage(`{}`))
}

func TestStatesExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStates(2, time.Minute)
		b, c := &fakeBackend{}, newFakeCall()
		p := &parked{method: "tools/call", name: "t", b: b, inner: c}
		p.add(serverReq("1", "elicitation/create"))
		token, err := s.park(p)
		if err != nil {
			t.Fatal(err)
		}
		if !isToken(token) || !c.parked.Load() {
			t.Fatalf("token %q, parked %v", token, c.parked.Load())
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if s.len() != 0 || c.abandoned.Load() != 1 || b.left.Load() != 1 {
			t.Fatalf("after the TTL: %d parked, abandoned %d, left %d; want 0, 1, 1", s.len(), c.abandoned.Load(), b.left.Load())
		}
		if got, why := s.take(token, "tools/call", "t", ""); got != nil || !strings.Contains(why, "expired") {
			t.Fatalf("take after expiry = %v, %q", got, why)
		}
	})
}

func TestStatesBindingAndBound(t *testing.T) {
	s := newStates(1, time.Hour)
	defer s.close()
	p := &parked{method: "tools/call", name: "t", b: &fakeBackend{}, inner: newFakeCall()}
	p.add(serverReq("1", "sampling/createMessage"))
	token, err := s.park(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, why := s.take(token, "tools/call", "other", ""); got != nil || !strings.Contains(why, `issued for tools/call "t"`) {
		t.Fatalf("take for another tool = %v, %q", got, why)
	}
	if got, why := s.take("sb1.forged", "tools/call", "t", ""); got != nil || why == "" {
		t.Fatalf("take of a forged token = %v, %q", got, why)
	}

	q := &parked{method: "tools/call", name: "u", b: &fakeBackend{}, inner: newFakeCall()}
	if _, err := s.park(q); err == nil {
		t.Fatalf("a second park beyond the bound of 1 succeeded")
	}
	if got, _ := s.take(token, "tools/call", "t", ""); got != p {
		t.Fatalf("take with the right binding failed")
	}
	if got, _ := s.take(token, "tools/call", "t", ""); got != nil {
		t.Fatalf("a token was used twice")
	}
}

// With auth on, a requestState is its caller's: another caller showing it
// is refused, and the token stays for its own.
func TestStatesBoundToCaller(t *testing.T) {
	s := newStates(4, time.Hour)
	defer s.close()
	p := &parked{method: "tools/call", name: "t", caller: "alice", b: &fakeBackend{}, inner: newFakeCall()}
	p.add(serverReq("1", "elicitation/create"))
	token, err := s.park(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, caller := range []string{"mallory", ""} {
		if got, why := s.take(token, "tools/call", "t", caller); got != nil || why != "issued to another caller" {
			t.Fatalf("take by %q = %v, %q", caller, got, why)
		}
	}
	if got, _ := s.take(token, "tools/call", "t", "alice"); got != p {
		t.Fatalf("take by its own caller failed")
	}
}

func TestParkedKeys(t *testing.T) {
	p := &parked{}
	p.add(serverReq("1", "elicitation/create"))
	p.add(serverReq("2", "elicitation/create"))
	p.add(serverReq("3", "roots/list"))
	var keys []string
	for _, r := range p.reqs {
		keys = append(keys, r.key)
	}
	if strings.Join(keys, ",") != "elicitation,elicitation_2,roots" {
		t.Fatalf("keys %v", keys)
	}
}

// TestModernResumeErrors: a retry whose requestState Switchboard never
// issued (or issued for another tool) gets -32602 naming the problem.
func TestModernResumeErrors(t *testing.T) {
	m := NewModernOverLegacy(nil, Options{Name: "x"})
	defer m.Close()
	req := jsonrpc.NewRequest(json.RawMessage(`7`), "tools/call", json.RawMessage(`{"name":"t","requestState":"sb1.forged","inputResponses":{},"_meta":{"`+
		mcp.MetaProtocolVersion+`":"2026-07-28","`+mcp.MetaClientCapabilities+`":{}}}`))
	c, err := m.Stateless(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := c.Poll()
	e := resp.ErrorOf()
	if e == nil || e.Code != jsonrpc.InvalidParams || !strings.Contains(e.Message, "invalid requestState") || string(resp.ID) != "7" {
		t.Fatalf("got %s", resp.Encode())
	}
	// Missing _meta and removed methods are refused before any upstream.
	for _, tc := range []struct {
		method, params string
		code           int
	}{
		{"tools/list", `{}`, jsonrpc.InvalidParams},
		{"tools/list", `{"_meta":{"` + mcp.MetaProtocolVersion + `":"2030-01-01","` + mcp.MetaClientCapabilities + `":{}}}`, jsonrpc.UnsupportedProtocolVersion},
		{"ping", `{"_meta":{"` + mcp.MetaProtocolVersion + `":"2026-07-28","` + mcp.MetaClientCapabilities + `":{}}}`, jsonrpc.MethodNotFound},
	} {
		c, err := m.Stateless(context.Background(), jsonrpc.NewRequest(json.RawMessage(`1`), tc.method, json.RawMessage(tc.params)))
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := c.Poll()
		if e := resp.ErrorOf(); e == nil || e.Code != tc.code {
			t.Errorf("%s %s: got %s; want code %d", tc.method, tc.params, resp.Encode(), tc.code)
		}
	}
}

func TestLegacyRequestDropsVersion(t *testing.T) {
	for _, in := range []string{
		`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`,
		`{"name":"t","_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"name":"t","_meta":{ "io.modelcontextprotocol/protocolVersion" : "2026-07-28" }}`,
		`{"name":"t","_meta":{"io.modelcontextprotocol\u002fprotocolVersion":"2026-07-28","progressToken":1}}`,
		`{"name":"t","_meta":{"a":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"p"},"z":{"_meta":2}}`,
	} {
		req := jsonrpc.NewRequest(json.RawMessage(`1`), "tools/call", json.RawMessage(in))
		out := legacyRequest(req)
		if !json.Valid(out.Params) {
			t.Fatalf("%s → invalid %s", in, out.Params)
		}
		if _, ok := out.MetaString(mcp.MetaProtocolVersion); ok {
			t.Errorf("%s → still has protocolVersion: %s", in, out.Params)
		}
		if n, _ := jsonrpc.StringMember(out.Params, "name"); n != "t" {
			t.Errorf("%s → lost name: %s", in, out.Params)
		}
		// Where _meta is, as the upstream's look-up of the progress token
		// finds it, agrees with a fresh walk.
		v, vs, ve, ok := out.LookupMeta("progressToken")
		fv, fs, fe, fok := jsonrpc.Lookup(out.Params, "_meta", "progressToken")
		if ok != fok || string(v) != string(fv) || vs != fs || ve != fe {
			t.Errorf("%s → progressToken %s [%d:%d] %v; a fresh Lookup finds %s [%d:%d] %v", in, v, vs, ve, ok, fv, fs, fe, fok)
		}
	}
}

// FuzzRemoveMember: removing a member found by Lookup leaves valid JSON
// without it.
func FuzzRemoveMember(f *testing.F) {
	for _, s := range []string{`{"k":1}`, `{"a":1,"k":2}`, `{"k":[1],"b":2}`, `{ "a" : 1 , "k" : "x" }`, `{"k\u0000":1,"k":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		_, s, e, ok := jsonrpc.Lookup([]byte(in), "k")
		if !ok {
			return
		}
		out, ok := removeMember([]byte(in), "k", s, e)
		if !ok {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("removeMember(%q) = %q: invalid", in, out)
		}
	})
}

// removeMember returns obj without the member key whose value spans
// obj[s:e] (offsets from a Lookup), with the comma that separated it. ok
// is false when the bytes before the value are not "key": literally (an
// escaped key); obj is then returned unchanged.
func removeMember(obj []byte, key string, s, e int) ([]byte, bool) {
	start, end, ok := memberCut(obj, key, s, e)
	if !ok {
		return obj, false
	}
	out := make([]byte, 0, len(obj)-(end-start))
	out = append(out, obj[:start]...)
	return append(out, obj[end:]...), true
}

// legacyRequest is req as a legacy server gets it: without _meta's
// protocolVersion, which marks a request as 2026-07-28 (to an HTTP
// upstream connection too, which would send it without the session). The
// other 2026-07-28 _meta members stay: _meta is open to any member, and a
// legacy server reads the era from its session's initialize; removing
// them would cost a decode and an encode per call.
func legacyRequest(req *jsonrpc.Message) *jsonrpc.Message {
	r := readModern(req)
	return r.legacy(req, new(jsonrpc.Message))
}

// amendResult is amendResponse on a result alone.
func amendResult(res []byte, method string) []byte {
	if add := resultAddition(res, method); add != nil {
		return prependMembers(res, add)
	}
	return res
}
