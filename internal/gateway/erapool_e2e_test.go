package gateway_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// 2026-07-28 clients of a legacy-only stdio server (the test server in mode
// plain), over HTTP: each request borrows a member of the legacy
// connection and gives it back (package era, gateway legacyPool), and
// everything that must reach exactly one request still does.

// modernReq is a 2026-07-28 tools/call of tool declaring caps; meta are
// more _meta members, more more params members (both "" for none).
func modernReq(id int, tool, args, caps, meta, more string) []byte {
	m := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps
	if meta != "" {
		m += "," + meta
	}
	p := fmt.Sprintf(`{"name":%q,"arguments":%s,"_meta":{%s}`, tool, args, m)
	if more != "" {
		p += "," + more
	}
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, p+"}"))
}

// modernHdr are the headers of a 2026-07-28 tools/call of tool.
func modernHdr(tool string) []string {
	return []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool}
}

// modernTool calls tool and returns its final message.
func (h *harness) modernTool(id int, tool, args, caps, more string) wireMsg {
	h.t.Helper()
	r := h.do("POST", "/legacy/mcp", modernReq(id, tool, args, caps, "", more), modernHdr(tool)...)
	if r.status != 200 {
		h.t.Fatalf("tools/call %s: %s", tool, r)
	}
	return r.last(h.t)
}

// inputRequired checks that m is an input_required result asking for
// sampling with the question text, and returns its requestState.
func inputRequired(t *testing.T, m wireMsg, text string) string {
	t.Helper()
	var res struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.ResultType != "input_required" || res.RequestState == "" {
		t.Fatalf("got %s, want an input_required result", describe(m))
	}
	// The server's question is the one this call raised.
	if q := string(res.InputRequests["sampling"]); !strings.Contains(q, `"question: `+text+`"`) {
		t.Fatalf("inputRequests %s; want sampling with this call's own question %q", m.Result, text)
	}
	return res.RequestState
}

// samplingAnswer is a retry's params members answering a sampling input.
func samplingAnswer(token, text string) string {
	return fmt.Sprintf(`"requestState":%q,"inputResponses":{"sampling":{"role":"assistant","model":"m","content":{"type":"text","text":%q}}}`, token, text)
}

// TestEraLentMembersRouteExactly: with the members lent per request,
// progress, cancellation and server→client requests still reach exactly
// the request they belong to. A server→client request raised while
// another request is in flight on the connection cannot be attributed and
// is refused (never given to the other); a parked call is not in flight in
// that sense, so the next request's own server→client request is its own;
// each retry resumes its own call with its own answer; a used or forged
// requestState gets -32602.
func TestEraLentMembersRouteExactly(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "legacy", mode: "plain", extra: "protocol: legacy"})
	const path = "/legacy/mcp"
	caps := `{"sampling":{}}`
	progressOf := func(m wireMsg) string {
		t.Helper()
		expectMethod(t, m, "notifications/progress")
		var p struct {
			Token json.RawMessage `json:"progressToken"`
		}
		_ = json.Unmarshal(m.Params, &p)
		return string(p.Token)
	}

	// A asks once released; B waits. Each reports progress under its
	// own token once it runs at the server.
	stA := h.open("POST", path, modernReq(1, "ask", `{"key":"ka","text":"for a"}`, caps, `"progressToken":"pa"`, ""), modernHdr("ask")...)
	if tok := progressOf(stA.next()); tok != `"pa"` {
		t.Fatalf("A's progress token %s", tok)
	}
	stB := h.open("POST", path, modernReq(2, "wait", `{"key":"kb","tag":"B"}`, caps, `"progressToken":"pb"`, ""), modernHdr("wait")...)
	if tok := progressOf(stB.next()); tok != `"pb"` {
		t.Fatalf("B's progress token %s", tok)
	}
	// A's sampling request comes while B's call is in flight too: whose it
	// is cannot be told, so the server is refused (A's tool reports the
	// refusal); B's stream never sees it.
	h.modernTool(3, "release", `{"key":"ka"}`, caps, "")
	mA := stA.next()
	if out := parseTool(t, mA); !strings.HasPrefix(out.Text, "error:-32007:") || string(mA.ID) != "1" {
		t.Fatalf("A: %s; want its own answer reporting the refused request", describe(mA))
	}
	// Closing B's stream cancels B upstream, and nothing else.
	stB.close()
	h.audit.wait(t, "B's dropped POST", func(a auditLine) bool { return string(a.RPCID) == "2" })
	if got := parseTool(t, h.modernTool(4, "state", `{}`, caps, "")).State.Cancelled; !slices.Equal(got, []string{"Bkb"}) {
		t.Fatalf("the server cancelled %v; want only B's request", got)
	}

	// C alone: its sampling request is its own, and parks.
	tc := inputRequired(t, h.modernTool(5, "ask", `{"text":"for c"}`, caps, ""), "for c")
	// C parked: the same capabilities are served at once, and D's own
	// request is D's.
	if out := parseTool(t, h.modernTool(6, "echo", `{"text":"beside c"}`, caps, "")); out.Text != "beside c" {
		t.Fatalf("echo beside a parked call: %+v", out)
	}
	td := inputRequired(t, h.modernTool(7, "ask", `{"text":"for d"}`, caps, ""), "for d")
	// Each retry resumes its own call with its own answer, in either order.
	if out := parseTool(t, h.modernTool(8, "ask", `{"text":"for d"}`, caps, samplingAnswer(td, "d's answer"))); out.Text != "answer:d's answer" {
		t.Fatalf("D resumed: %+v", out)
	}
	mC := h.modernTool(9, "ask", `{"text":"for c"}`, caps, samplingAnswer(tc, "c's answer"))
	if out := parseTool(t, mC); out.Text != "answer:c's answer" || string(mC.ID) != "9" {
		t.Fatalf("C resumed: %s", describe(mC))
	}
	// Used and forged states: a clear error, nothing resumed.
	for _, token := range []string{tc, "sb1.forged"} {
		r := h.do("POST", path, modernReq(10, "ask", `{"text":"for c"}`, caps, "", samplingAnswer(token, "again")), modernHdr("ask")...)
		if e := expectRPCError(t, r, 400, -32602); !strings.Contains(e.Message, "invalid requestState") {
			t.Fatalf("retry with %s: %s; want -32602 invalid requestState", token, r)
		}
	}
	// The server got the refusal (A's), then D's and C's answers: nothing
	// else reached it.
	if got := parseTool(t, h.modernTool(11, "state", `{}`, caps, "")).State.Answers; len(got) != 3 ||
		!strings.HasPrefix(got[0], "error:-32007:") || got[1] != "answer:d's answer" || got[2] != "answer:c's answer" {
		t.Fatalf("the server got the answers %q", got)
	}
}

// pidAttr finds the pid of a "process started" log record.
var pidAttr = regexp.MustCompile(`\bpid=(\d+)`)

// TestEraProbeChildStopped: with protocol: auto, the stdio child started
// only to probe the server's era (server/discover) is stopped once the
// server turns out to be legacy-only: what keeps running is the shared
// child of legacy sessions and the one serving translated requests.
// Later requests use the cached verdict: no new probe child.
func TestEraProbeChildStopped(t *testing.T) {
	t.Parallel()
	h := start(t, fastRestart, dest{name: "legacy", mode: "plain"}) // protocol: auto
	shared := h.initialize("legacy", "").tool("pid", nil).PID
	translated := parseTool(t, h.modernTool(1, "pid", `{}`, `{}`, "")).PID
	h.logs.wait(t, slog.LevelInfo, "idle connection stopped", "")
	var started []int
	for _, r := range h.logs.all() {
		if m := pidAttr.FindStringSubmatch(r.Attrs); r.Msg == "process started" && m != nil {
			pid, _ := strconv.Atoi(m[1])
			started = append(started, pid)
		}
	}
	if len(started) != 3 || !slices.Contains(started, shared) || !slices.Contains(started, translated) || shared == translated {
		t.Fatalf("processes started %v (shared %d, translated %d); want those two and the probe's", started, shared, translated)
	}
	// The probe's child was stopped before the translated answer came.
	alive := h.procs()
	slices.Sort(alive)
	want := []int{shared, translated}
	slices.Sort(want)
	if !slices.Equal(alive, want) {
		t.Fatalf("processes running %v; want only %v (the probe's child stopped)", alive, want)
	}
	for i := range 3 {
		if out := parseTool(t, h.modernTool(2+i, "echo", `{"text":"again"}`, `{}`, "")); out.Text != "again" {
			t.Fatalf("echo: %+v", out)
		}
	}
	if n := h.logs.count(slog.LevelInfo, "process started"); n != 3 {
		t.Fatalf("%d processes started; want no new probe child", n)
	}
}

// TestEraTranslatedUnderMaxConcurrent: a translated request takes one of
// the destination's max_concurrent slots, not two (with one slot it used
// to wait for itself until the timeout).
func TestEraTranslatedUnderMaxConcurrent(t *testing.T) {
	t.Parallel()
	top := fastRestart + "timeout: 5s\nlimits:\n  destinations:\n    legacy:\n      max_concurrent: 1\n"
	h := start(t, top, dest{name: "legacy", mode: "plain", extra: "protocol: legacy"})
	for i := range 3 {
		m := h.modernTool(1+i, "echo", `{"text":"one slot"}`, `{}`, "")
		if out := parseTool(t, m); out.Text != "one slot" {
			t.Fatalf("echo %d: %s", i, describe(m))
		}
	}
}
