package metrics

import (
	"cmp"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// stateCollector turns the gateway's Status into metrics at scrape time.
type stateCollector struct {
	status  func() Status
	version string

	info, state, sessions, members, children, inFlight, restarts *prometheus.Desc
	reloads, lastOK, lastReload, loaded, auditErrors, build      *prometheus.Desc
	stalled                                                      *prometheus.Desc
}

var _ prometheus.Collector = (*stateCollector)(nil)

func newStateCollector(status func() Status, version string) *stateCollector {
	d := []string{"destination"}
	return &stateCollector{
		status:  status,
		version: cmp.Or(version, "unknown"),
		info: prometheus.NewDesc("switchboard_destination_info",
			"A configured destination and its type; always 1.", []string{"destination", "type"}, nil),
		state: prometheus.NewDesc("switchboard_destination_state",
			"1 for the destination's current state (idle, starting, ready, restarting, failed, closed, unreachable, needs_login), 0 for the others.",
			[]string{"destination", "state"}, nil),
		sessions: prometheus.NewDesc("switchboard_sessions",
			"Client sessions of the destination's own endpoints.", d, nil),
		members: prometheus.NewDesc("switchboard_destination_members",
			"Client sessions the destination serves, directly or through aggregated endpoints.", d, nil),
		children: prometheus.NewDesc("switchboard_destination_children",
			"Per-session processes running (isolation: session).", d, nil),
		inFlight: prometheus.NewDesc("switchboard_mcp_calls_in_flight",
			"Requests sent to the destination's servers and not answered yet.", d, nil),
		restarts: prometheus.NewDesc("switchboard_upstream_restarts_total",
			"Connections to the destination's servers restarted after they ended unexpectedly (a reload that replaces the destination starts it again from 0).", d, nil),
		reloads: prometheus.NewDesc("switchboard_config_reloads_total",
			"Config reloads, by result: ok (applied) or failed (rejected, the old config kept serving).", []string{"result"}, nil),
		lastOK: prometheus.NewDesc("switchboard_config_last_reload_successful",
			"1 if the last config reload (or the start) succeeded.", nil, nil),
		lastReload: prometheus.NewDesc("switchboard_config_last_reload_timestamp_seconds",
			"When the last config reload was tried (or the start), in Unix seconds.", nil, nil),
		loaded: prometheus.NewDesc("switchboard_config_loaded_timestamp_seconds",
			"When the configuration in use was loaded, in Unix seconds.", nil, nil),
		auditErrors: prometheus.NewDesc("switchboard_audit_write_errors_total",
			"Audit log lines that could not be written.", nil, nil),
		stalled: prometheus.NewDesc("switchboard_calls_stalled_total",
			"Calls held on Switchboard's own path past the stall threshold, by stage: write (queued for a server, not written), read (its output waiting unread), deliver (read, not handed to the call), take (handed to the call, never taken by the front), server (a stdio server that held an answer until probed), cpu (the same, its threads waiting for a CPU at least half that time: an overloaded machine).",
			[]string{"stage"}, nil),
		build: prometheus.NewDesc("switchboard_build_info",
			"Switchboard's version and Go version; always 1.", []string{"version", "goversion"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.state, c.sessions, c.members, c.children, c.inFlight,
		c.restarts, c.reloads, c.lastOK, c.lastReload, c.loaded, c.auditErrors, c.stalled, c.build} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.build, prometheus.GaugeValue, 1, c.version, runtime.Version())
	if c.status == nil {
		return
	}
	st := c.status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, d := range st.Destinations {
		gauge(c.info, 1, d.Name, d.Type)
		for _, s := range States {
			v := 0.0
			if s == d.State {
				v = 1
			}
			gauge(c.state, v, d.Name, s)
		}
		gauge(c.sessions, float64(d.Sessions), d.Name)
		gauge(c.members, float64(d.Members), d.Name)
		gauge(c.children, float64(d.Children), d.Name)
		gauge(c.inFlight, float64(d.InFlight), d.Name)
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(d.Restarts), d.Name)
	}
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(st.Reloads), "ok")
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(st.ReloadFailures), "failed")
	ok := 0.0
	if st.LastReloadOK {
		ok = 1
	}
	gauge(c.lastOK, ok)
	if !st.LastReload.IsZero() {
		gauge(c.lastReload, float64(st.LastReload.UnixNano())/1e9)
	}
	if !st.ConfigLoaded.IsZero() {
		gauge(c.loaded, float64(st.ConfigLoaded.UnixNano())/1e9)
	}
	ch <- prometheus.MustNewConstMetric(c.auditErrors, prometheus.CounterValue, float64(st.AuditWriteErrors))
	for stage, n := range st.Stalled {
		ch <- prometheus.MustNewConstMetric(c.stalled, prometheus.CounterValue, float64(n), stage)
	}
}
