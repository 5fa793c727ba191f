package gate

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/guard"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
)

// Hook is an external classifier the gate asks about a call's arguments
// and result (docs/guards.md "External hook"). The contract, one POST per
// check, Content-Type application/json:
//
//	{"version": 1, "destination": "fs", "tool": "read", "direction": "result",
//	 "strings": [{"path": "/content/0/text", "text": "…"}], "unsent": 0}
//
// strings are the document's string values (as guard.Walk sees them,
// base64 payloads left out) with their JSON Pointers, up to MaxBytes;
// unsent counts the bytes of the strings past it. The answer, status 200:
//
//	{"action": "allow"}
//	{"action": "block", "rule": "prompt-injection"}
//	{"action": "redact", "spans": [{"path": "/content/0/text", "offset": 4, "length": 11, "rule": "person"}]}
//
// A span's offset and length are bytes into the string at path; each is
// replaced by [REDACTED:rule] ("hook" when rule is empty). Rules are
// letters, digits, '.', '_' and '-', at most 64 bytes. Anything else (a
// timeout, a refused connection, another status, an answer that does not
// parse or names a path or span that was not sent) is a failure: the
// message passes with FailClosed false, and is refused with it true.
type Hook struct {
	// URL is where checks are POSTed.
	URL string
	// Token is sent as "Authorization: Bearer Token"; "" sends none.
	Token string
	// Timeout bounds one check; zero: 2 s.
	Timeout time.Duration
	// FailClosed refuses a message the hook gave no valid answer on.
	FailClosed bool
	// Arguments and Result say which directions are checked.
	Arguments, Result bool
	// MaxBytes caps the string bytes sent per check; zero: 256 KiB.
	MaxBytes int
	// Client sends the checks; nil: a client of the gate package's own.
	Client *http.Client
}

// hookClient sends checks for hooks without a Client; the timeout is each
// check's context.
var hookClient = &http.Client{}

// Hook directions, as the request names them.
const (
	dirArguments = "arguments"
	dirResult    = "result"
)

type hookString struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

type hookRequest struct {
	Version     int          `json:"version"`
	Destination string       `json:"destination"`
	Tool        string       `json:"tool"`
	Direction   string       `json:"direction"`
	Strings     []hookString `json:"strings"`
	Unsent      int          `json:"unsent"`
}

type hookSpan struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
	Rule   string `json:"rule"`
}

type hookAnswer struct {
	Action string     `json:"action"`
	Rule   string     `json:"rule"`
	Spans  []hookSpan `json:"spans"`
}

// verdict is one check's outcome: the action taken (allow, block,
// redact), the findings to redact, and the audit note.
type verdict struct {
	action   string
	rule     string
	findings []guard.Finding
	note     string
}

// collector is a guard.Detector that keeps a copy of every string it is
// given (Walk's strings are valid only during Scan) and reports it as one
// finding spanning it, so that guard.Walk pairs each string with its JSON
// Pointer.
type collector struct{ texts []string }

func (c *collector) Scan(s string) []guard.Finding {
	if s == "" {
		return nil
	}
	c.texts = append(c.texts, strings.Clone(s))
	return []guard.Finding{{Length: len(s)}}
}

// check asks the hook about doc (a call's arguments or result).
func (h *Hook) check(ctx context.Context, dest, tool, dir string, doc json.RawMessage) verdict {
	start := time.Now()
	v, err := h.ask(ctx, dest, tool, dir, doc)
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		v = verdict{action: "allow", note: fmt.Sprintf("%s: %v, fail open (%s)", dir, err, took)}
		if h.FailClosed {
			v = verdict{action: "block", rule: "unavailable", note: fmt.Sprintf("%s: %v, fail closed (%s)", dir, err, took)}
		}
		return v
	}
	switch v.action {
	case "block":
		v.note = fmt.Sprintf("%s: block %s (%s)", dir, v.rule, took)
	case "redact":
		v.note = fmt.Sprintf("%s: redact %d span(s) (%s)", dir, len(v.findings), took)
	default:
		v.note = fmt.Sprintf("%s: allow (%s)", dir, took)
	}
	return v
}

// hookError is a failed check, described without the URL or the text.
type hookError string

func (e hookError) Error() string { return string(e) }

func (h *Hook) ask(ctx context.Context, dest, tool, dir string, doc json.RawMessage) (verdict, error) {
	max := h.MaxBytes
	if max <= 0 {
		max = 256 << 10
	}
	var col collector
	rep, err := guard.Walk(doc, max, &col)
	if err != nil {
		return verdict{}, hookError("the " + dir + " is not valid JSON")
	}
	req := hookRequest{Version: 1, Destination: dest, Tool: tool, Direction: dir, Strings: make([]hookString, len(col.texts)), Unsent: rep.Unscanned}
	sent := make(map[string]string, len(col.texts))
	for i, f := range rep.Findings {
		req.Strings[i] = hookString{Path: f.Path, Text: col.texts[i]}
		sent[f.Path] = col.texts[i]
	}
	body, err := json.Marshal(req)
	if err != nil {
		return verdict{}, hookError("cannot encode the check")
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return verdict{}, hookError("invalid hook URL")
	}
	hr.Header.Set("Content-Type", "application/json")
	if h.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+h.Token)
	}
	resp, err := cmp.Or(h.Client, hookClient).Do(hr)
	if err != nil {
		// The error names the URL: described by kind only.
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return verdict{}, hookError("timeout after " + timeout.String())
		}
		if ctx.Err() != nil {
			return verdict{}, hookError("canceled")
		}
		return verdict{}, hookError("unreachable")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return verdict{}, hookError(fmt.Sprintf("status %d", resp.StatusCode))
	}
	var a hookAnswer
	dec := json.NewDecoder(io.LimitReader(resp.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		if ctx.Err() != nil {
			return verdict{}, hookError("timeout after " + timeout.String())
		}
		return verdict{}, hookError("malformed answer")
	}
	if a.Rule != "" && !validRule(a.Rule) {
		return verdict{}, hookError("malformed answer: invalid rule")
	}
	switch a.Action {
	case "allow":
		return verdict{action: "allow"}, nil
	case "block":
		if a.Rule == "" {
			a.Rule = "hook"
		}
		return verdict{action: "block", rule: a.Rule}, nil
	case "redact":
		v := verdict{action: "redact"}
		for _, s := range a.Spans {
			text, ok := sent[s.Path]
			if !ok || s.Offset < 0 || s.Length <= 0 || s.Offset+s.Length > len(text) || s.Rule != "" && !validRule(s.Rule) {
				return verdict{}, hookError("malformed answer: a span outside the strings sent")
			}
			if s.Rule == "" {
				s.Rule = "hook"
			}
			v.findings = append(v.findings, guard.Finding{Detector: "hook", Rule: s.Rule, Path: s.Path, Offset: s.Offset, Length: s.Length})
		}
		return v, nil
	}
	return verdict{}, hookError("malformed answer: action must be allow, block or redact")
}

func validRule(r string) bool {
	if len(r) > 64 {
		return false
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-", c)) {
			return false
		}
	}
	return true
}

// hookArguments asks the hook about a call's arguments: the request to
// send (redacted, or req itself), or a refusal.
func (g *Gate) hookArguments(ctx context.Context, h *Hook, req *jsonrpc.Message, tool string, note func(string)) (*jsonrpc.Message, session.Call) {
	args, start, end, ok := jsonrpc.Lookup(req.Params, "arguments")
	if !ok {
		return req, nil
	}
	v := h.check(ctx, g.Name(), tool, dirArguments, args)
	note(v.note)
	switch v.action {
	case "block":
		return nil, refuse(req, "tools/call %q refused by switchboard's guard hook: %s", tool, v.rule)
	case "redact":
		return withArguments(req, args, start, end, v.findings, guard.Placeholder), nil
	}
	return req, nil
}

// hookResult asks the hook about a call's result: the result to pass on
// (nil: as it is).
func (g *Gate) hookResult(ctx context.Context, h *Hook, result json.RawMessage, tool string) (json.RawMessage, string) {
	v := h.check(ctx, g.Name(), tool, dirResult, result)
	switch v.action {
	case "block":
		return withheld("The result of %s was withheld by Switchboard's guard hook: %s.", tool, v.rule), v.note
	case "redact":
		out, err := guard.Rewrite(result, v.findings, guard.Placeholder)
		if err != nil {
			return nil, v.note
		}
		return out, v.note
	}
	return nil, v.note
}

// hooked is a call whose response's result the hook checks before it is
// passed on. The check runs in a goroutine of the call's own, started
// when the response arrives and ended by the hook's answer or timeout;
// until then Poll holds the response and Ready is the check's end.
// Poll, Ready and the fields but out and note belong to the call's
// reader; out and note are written by the check before done is closed.
type hooked struct {
	session.Call
	check  func(ctx context.Context, result json.RawMessage) (json.RawMessage, string)
	onNote func(string) // the reader's: adds the note to the request's record
	ctx    context.Context
	cancel context.CancelFunc // Abandon's: ends the check

	checking bool
	ended    bool // the wrapped call's ended with the held response
	done     chan struct{}
	out      *jsonrpc.Message
	note     string
}

func newHooked(c session.Call, check func(context.Context, json.RawMessage) (json.RawMessage, string), onNote func(string)) *hooked {
	ctx, cancel := context.WithCancel(context.Background())
	return &hooked{Call: c, check: check, onNote: onNote, ctx: ctx, cancel: cancel}
}

func (c *hooked) Poll() (*jsonrpc.Message, bool) {
	if c.checking {
		select {
		case <-c.done:
		default:
			return nil, false
		}
		c.checking = false
		c.onNote(c.note)
		m := c.out
		c.out = nil
		return m, c.ended
	}
	m, ended := c.Call.Poll()
	if m == nil || !m.IsResponse() || len(m.Result) == 0 {
		return m, ended
	}
	c.checking, c.ended, c.done = true, ended, make(chan struct{})
	go func() {
		defer close(c.done)
		defer c.cancel()
		r, note := c.check(c.ctx, m.Result)
		out := m
		if r != nil {
			cp := *m
			cp.Result = r
			out = &cp
		}
		c.out, c.note = out, note
	}()
	return nil, false
}

func (c *hooked) Ready() <-chan struct{} {
	if c.checking {
		return c.done
	}
	return c.Call.Ready()
}

// Abandon ends a check in progress and passes on to the wrapped call.
func (c *hooked) Abandon(cancel bool) {
	c.cancel()
	c.Call.Abandon(cancel)
}

func (c *hooked) UpstreamTime() time.Duration { return session.UpstreamTime(c.Call) }
