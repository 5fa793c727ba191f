package gateway_test

import (
	"testing"
	"time"
)

// TestStalledServerProbed is issue 27 end to end, with a real child: a
// stdio server that sits on a tools/call until it reads more input (tool
// "held") is probed with a ping once the connection has been silent for a
// second, so the call is answered then, not at the gateway's timeout (30
// s), and /metrics counts it in switchboard_calls_stalled_total{stage=
// "server"}; the other stages stay where they were. Before the probe the
// client got 504 after the whole timeout.
func TestStalledServerProbed(t *testing.T) {
	h := start(t, "", dest{name: "a", mode: "plain"})
	_, before := h.scrapeMetrics()
	stage := func(s string) string { return `switchboard_calls_stalled_total{stage="` + s + `"}` }
	for _, s := range []string{"write", "read", "deliver", "take", "server"} {
		if _, ok := before[stage(s)]; !ok {
			t.Fatalf("%s is not exported", stage(s))
		}
	}
	s := h.initialize("a", "{}")
	t0 := time.Now()
	out := s.tool("held", map[string]any{})
	if took := time.Since(t0); took > 15*time.Second {
		t.Fatalf("answered after %v: the probe did not release it", took)
	}
	if out.Text != "held" {
		t.Fatalf("answer %+v", out)
	}
	h.waitMetrics(map[string]float64{
		stage("server"):  before[stage("server")] + 1,
		stage("write"):   before[stage("write")],
		stage("read"):    before[stage("read")],
		stage("deliver"): before[stage("deliver")],
		stage("take"):    before[stage("take")],
	})
}
