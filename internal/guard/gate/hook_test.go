package gate

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHookAnswers: every answer the contract does not allow is a failure
// (and so refused with FailClosed), a valid redact becomes findings of
// the strings sent, and MaxBytes leaves strings unsent and counted.
func TestHookAnswers(t *testing.T) {
	var answer string
	status := http.StatusOK
	var last hookRequest
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		last = hookRequest{}
		_ = json.Unmarshal(b, &last)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	defer hs.Close()
	h := &Hook{URL: hs.URL, FailClosed: true, MaxBytes: 10}
	doc := json.RawMessage(`{"a":"hello","b":"secret words","c":["x"]}`)
	for _, c := range []struct {
		answer string
		status int
		want   string // the note's start
	}{
		{`{"action":"allow"}`, 200, "result: allow"},
		{`{"action":"block","rule":"pi"}`, 200, "result: block pi"},
		{`{"action":"block"}`, 200, "result: block hook"},
		{`{"action":"redact","spans":[{"path":"/a","offset":1,"length":3,"rule":"x"}]}`, 200, "result: redact 1 span(s)"},
		{`{"action":"redact","spans":[{"path":"/b","offset":0,"length":3}]}`, 200, "result: malformed answer: a span outside the strings sent, fail closed"}, // /b was not sent (over MaxBytes)
		{`{"action":"redact","spans":[{"path":"/a","offset":3,"length":9}]}`, 200, "result: malformed answer: a span outside"},
		{`{"action":"block","rule":"has space"}`, 200, "result: malformed answer: invalid rule"},
		{`{"action":"maybe"}`, 200, "result: malformed answer: action must be"},
		{`{"action":"allow","extra":1}`, 200, "result: malformed answer, fail closed"},
		{`not json`, 200, "result: malformed answer, fail closed"},
		{`{"action":"allow"}`, 500, "result: status 500, fail closed"},
	} {
		answer, status = c.answer, c.status
		v := h.check(context.Background(), "d", "t", dirResult, doc)
		if !strings.HasPrefix(v.note, c.want) {
			t.Errorf("%s (%d): note %q, want %q…", c.answer, c.status, v.note, c.want)
		}
		failed := strings.Contains(c.want, "fail closed") || strings.Contains(c.want, "malformed")
		if failed && (v.action != "block" || v.rule != "unavailable") {
			t.Errorf("%s: a failure with FailClosed gives %s %s", c.answer, v.action, v.rule)
		}
	}
	if len(last.Strings) != 2 || last.Strings[0] != (hookString{"/a", "hello"}) || last.Strings[1] != (hookString{"/c/0", "x"}) || last.Unsent != 12 {
		t.Errorf("request: %+v, want /a and /c/0 sent, 12 bytes unsent", last)
	}
	h.FailClosed = false
	answer, status = `{"action":"nope"}`, 200
	if v := h.check(context.Background(), "d", "t", dirArguments, doc); v.action != "allow" || !strings.HasPrefix(v.note, "arguments: malformed answer: action must be allow, block or redact, fail open") {
		t.Errorf("fail open: %+v", v)
	}
}
