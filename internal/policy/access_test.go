package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/auth"
)

func accessConfig() *Setup {
	return &Setup{
		Names: []string{"log", "fs", "other"},
		Clients: map[string]*Client{
			"alice": {Destinations: []string{"log"}, Namespaces: []string{"mcp", "ns1"},
				Tools: Filter{Deny: []string{"*secret_delete*"}}, RateLimit: &Rate{Rate: 0.001, Burst: 2}},
			"staff":  {Namespaces: []string{"*"}},
			"robot":  {Destinations: []string{"*"}},
			"reader": {Destinations: []string{"log"}, ReadOnly: true},
		},
	}
}

// The rule of access.go: destinations bound every endpoint; namespaces add
// views only; no destinations listed: a view shows every member.
func TestAccessGrants(t *testing.T) {
	cfg := accessConfig()
	var lim Limiter
	a := NewAuthority(cfg.Clients, &lim)
	of := func(name string) *Access { return a.Of(&auth.Identity{Client: &auth.Client{Name: name}}) }
	ns1, def := ViewEndpoint("ns1"), ViewEndpoint("")
	for _, c := range []struct {
		who    string
		e      Endpoint
		server string
		want   bool
	}{
		{"alice", DestinationEndpoint("log"), "log", true},
		{"alice", DestinationEndpoint("fs"), "fs", false},
		{"alice", ns1, "log", true},
		{"alice", ns1, "fs", false}, // a namespace never widens destinations
		{"alice", def, "other", false},
		{"alice", ns1, "", true},                  // the view's meta-tools
		{"alice", ViewEndpoint("ns2"), "", false}, // not granted
		{"staff", ns1, "fs", true},                // no destinations: every member
		{"staff", DestinationEndpoint("fs"), "fs", false},
		{"robot", DestinationEndpoint("fs"), "fs", true},
		{"robot", def, "fs", false}, // no namespaces: no view
	} {
		if got := of(c.who).MayReach(c.e, c.server); got != c.want {
			t.Errorf("%s reaches %q through %s = %v, want %v", c.who, c.server, c.e, got, c.want)
		}
	}
	if a.Of(nil) != nil || !a.Of(nil).MayReach(ns1, "fs") {
		t.Error("no identity: not everything")
	}
	nobody := a.Of(&auth.Identity{Method: "oauth", Subject: "x"})
	if nobody.MayOpen(def) || nobody.Client() != "sub:x" {
		t.Errorf("an OAuth caller that is no client: %+v", nobody)
	}

	alice := of("alice")
	if d := alice.Decide(ToolCall{Endpoint: ns1, Server: "log", Tool: "log__secret_delete"}); d == nil {
		t.Error("alice may call a denied tool")
	}
	if d := alice.Decide(ToolCall{Endpoint: ns1, Server: "fs", Tool: "fs__read"}); d == nil {
		t.Error("alice may call a tool of a server outside her destinations")
	}
	// Charged calls take from the one bucket (burst 2); refused ones do not.
	for i := range 2 {
		if d := alice.Decide(ToolCall{Endpoint: ns1, Server: "log", Tool: "log__write", Charge: true}); d != nil {
			t.Fatalf("charged call %d: %v", i, d)
		}
	}
	d := alice.Decide(ToolCall{Endpoint: DestinationEndpoint("log"), Server: "log", Tool: "write", Charge: true})
	if d == nil || d.RetryAfter <= 0 || !strings.Contains(d.Reason, "rate limit of client alice") {
		t.Errorf("third charged call: %+v, want the rate limit", d)
	}
	if ok, _ := alice.Take(time.Now()); ok {
		t.Error("the bucket refilled")
	}
	if d := alice.Decide(ToolCall{Endpoint: ns1, Server: "log", Tool: "log__write"}); d != nil {
		t.Errorf("an uncharged call (its request paid) refused: %v", d)
	}

	reader := of("reader")
	if reader.Decide(ToolCall{Endpoint: DestinationEndpoint("log"), Server: "log", Tool: "w"}) == nil ||
		reader.Decide(ToolCall{Endpoint: DestinationEndpoint("log"), Server: "log", Tool: "r", ReadOnly: true}) != nil {
		t.Error("read_only not applied")
	}
}

func TestAccessWarnings(t *testing.T) {
	views := map[string][]string{"": {"log", "fs", "other"}, "ns1": {"log", "fs"}}
	w := strings.Join(Warnings(accessConfig(), views), "\n")
	for _, want := range []string{
		"client alice: /mcp (namespaces: mcp) shows it only log; hidden, not in the client's destinations: fs, other",
		"client alice: /mcp/ns1 (namespaces: ns1) shows it only log; hidden, not in the client's destinations: fs",
		"client staff lists no destinations, so the views it may open show it every member: it reaches fs, log, other",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "robot") || strings.Contains(w, "reader") {
		t.Errorf("warnings about clients without views:\n%s", w)
	}
}

// BenchmarkDecide: the cost of the decision on every tool call (a client
// with tool rules and a rate limit, the call charged).
func BenchmarkDecide(b *testing.B) {
	cfg := accessConfig()
	cfg.Clients["alice"].RateLimit = &Rate{Rate: 1e9, Burst: 1 << 30}
	var lim Limiter
	acc := NewAuthority(cfg.Clients, &lim).Client("alice")
	for _, charge := range []bool{false, true} {
		c := ToolCall{Endpoint: ViewEndpoint("ns1"), Server: "log", Tool: "log__write", Charge: charge}
		b.Run(map[bool]string{false: "rules", true: "rules+rate"}[charge], func(b *testing.B) {
			for b.Loop() {
				if d := acc.Decide(c); d != nil {
					b.Fatal(d)
				}
			}
		})
	}
}
