package streamable

import (
	"net/http"
	"testing"
)

func TestAccepts(t *testing.T) {
	for _, tt := range []struct {
		accept                   []string
		jsonOK, sseOK, preferSSE bool
	}{
		{nil, true, true, false},
		{[]string{"application/json, text/event-stream"}, true, true, false},
		{[]string{"text/event-stream, application/json"}, true, true, true},
		{[]string{"text/event-stream"}, false, true, true},
		{[]string{"Application/JSON; charset=utf-8"}, true, false, false},
		{[]string{"text/html", "application/*;q=0.5"}, true, false, false},
		{[]string{"text/*,application/json"}, true, true, false},
		{[]string{"*/*"}, true, true, false},
		{[]string{"text/html,image/png"}, false, false, false},
		{[]string{",, ,"}, false, false, false},
	} {
		r := &http.Request{Header: http.Header{}}
		if tt.accept != nil {
			r.Header["Accept"] = tt.accept
		}
		j, s, p := accepts(r)
		if j != tt.jsonOK || s != tt.sseOK || p != tt.preferSSE {
			t.Errorf("Accept %q: json %v sse %v preferSSE %v, want %v %v %v", tt.accept, j, s, p, tt.jsonOK, tt.sseOK, tt.preferSSE)
		}
	}
}
