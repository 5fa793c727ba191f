package gateway_test

// End-to-end tests of hot reload: a gateway serving a config FILE that is
// edited while clients call tools continuously (several goroutines, on
// per-destination sessions and on an aggregated /mcp session), and the
// real binary reloading on SIGHUP with --no-reload.
//
// Synchronisation is by events only: the gateway's log records (each one
// signals), stream events, and markers — a notifications/message the test
// server sends after its response, so it lands on the GET streams behind
// anything the reload delivered there. Polling with a deadline is used only
// to see a process gone.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gateway"
)

// ---------------------------------------------------------------------------
// A gateway served from a config file.

// cfgFile is the config file of a gateway under test; every version of it
// carries the same tag, so the harness finds every process it started.
type cfgFile struct {
	t    *testing.T
	path string
	tag  string
	g    *gateway.Gateway // the gateway serving it
}

func (c *cfgFile) yaml(top string, dests ...dest) string {
	return configYAML(c.t, c.tag, top, dests...)
}

// write replaces the file's contents in place, as many editors do (the
// watcher must not act on a half-written file).
func (c *cfgFile) write(text string) {
	c.t.Helper()
	if err := os.WriteFile(c.path, []byte(text), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// startFile is start with the config in a file that the gateway watches
// (opts.ConfigPath is set; ReloadInterval defaults to 50 ms).
func startFile(t *testing.T, opts gateway.Options, top string, dests ...dest) (*harness, *cfgFile) {
	t.Helper()
	cf := &cfgFile{t: t, path: filepath.Join(t.TempDir(), "switchboard.yaml"), tag: newTag(t)}
	cf.write(cf.yaml(top, dests...))
	cfg, err := config.Load(cf.path)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	opts.ConfigPath = cf.path
	if opts.ReloadInterval == 0 {
		opts.ReloadInterval = 50 * time.Millisecond
	}
	h, g := serveConfig(t, cf.tag, cfg, opts, nil)
	cf.g = g
	return h, cf
}

// serveConfig serves cfg on 127.0.0.1:0 until the test ends, like start;
// beforeServe, if set, runs between New and Serve.
func serveConfig(t *testing.T, tag string, cfg *config.Config, opts gateway.Options, beforeServe func()) (*harness, *gateway.Gateway) {
	t.Helper()
	h := &harness{t: t, tag: tag, audit: newLineSink(), logs: newLogStore(), served: make(chan error, 1)}
	opts.Logger = slog.New(&logHandler{store: h.logs})
	opts.AuditWriter = h.audit
	g, err := gateway.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if beforeServe != nil {
		beforeServe()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.base = "http://" + ln.Addr().String()
	h.tr = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256}
	h.client = &http.Client{Transport: h.tr, Timeout: 2 * waitFor}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.served <- g.Serve(ctx, ln) }()
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			recs := h.logs.all()
			if len(recs) > 300 {
				recs = recs[len(recs)-300:]
			}
			var b strings.Builder
			for _, r := range recs {
				fmt.Fprintf(&b, "%s %s %s%s\n", r.Time.Format("15:04:05.000"), r.Level, r.Msg, r.Attrs)
			}
			t.Logf("gateway log (last %d records):\n%s", len(recs), b.String())
		}
	})
	return h, g
}

// waitCount blocks until at least n records with level and msg were
// logged (or fails after waitFor) and returns the kept ones.
func (s *logStore) waitCount(t testing.TB, level slog.Level, msg string, n int) []logRec {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		sig := s.signal
		got := s.counts[level.String()+" "+msg]
		s.mu.Unlock()
		if got >= n {
			var out []logRec
			for _, r := range s.all() {
				if r.Level == level && r.Msg == msg {
					out = append(out, r)
				}
			}
			return out
		}
		select {
		case <-sig:
		case <-deadline.C:
			t.Fatalf("%d %s logs %q within %s, want %d", got, level, msg, waitFor, n)
		}
	}
}

// ---------------------------------------------------------------------------
// /healthz

type health struct {
	Status       string `json:"status"`
	ConfigLoaded string `json:"config_loaded_at"`
	LastReload   struct {
		Time  time.Time `json:"time"`
		OK    bool      `json:"ok"`
		Error string    `json:"error"`
	} `json:"last_reload"`
	Destinations []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		State    string `json:"state"`
		Error    string `json:"error"`
		Sessions int    `json:"sessions"`
	} `json:"destinations"`
	raw []byte
}

func (hz *health) names() []string {
	var out []string
	for _, d := range hz.Destinations {
		out = append(out, d.Name)
	}
	return out
}

func (hz *health) state(name string) (state, msg string) {
	for _, d := range hz.Destinations {
		if d.Name == name {
			return d.State, d.Error
		}
	}
	return "", ""
}

func (hz *health) String() string { return string(hz.raw) }

func (hz *health) loadedAt() time.Time {
	ts, _ := time.Parse(time.RFC3339Nano, hz.ConfigLoaded)
	return ts
}

func fetchHealth(t testing.TB, client *http.Client, base string) *health {
	t.Helper()
	r, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	hz := &health{raw: b}
	if r.StatusCode != 200 || mediaType(r.Header) != "application/json" || json.Unmarshal(b, hz) != nil {
		t.Fatalf("GET /healthz: HTTP %d %s: %s", r.StatusCode, r.Header.Get("Content-Type"), b)
	}
	if _, err := time.Parse(time.RFC3339Nano, hz.ConfigLoaded); err != nil {
		t.Fatalf("healthz config_loaded_at %q: %v", hz.ConfigLoaded, err)
	}
	return hz
}

func (h *harness) health() *health { h.t.Helper(); return fetchHealth(h.t, h.client, h.base) }

// waitHealth polls /healthz (with a deadline: a state reached) until ok.
func (h *harness) waitHealth(what string, ok func(*health) bool) *health {
	h.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		hz := h.health()
		if ok(hz) {
			return hz
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("healthz never showed %s: %s", what, hz)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Raw MCP sessions usable from any goroutine, on any endpoint (a
// destination's /{d}/mcp or the aggregated /mcp).

type mcpSess struct {
	h    *harness
	path string
	id   string
	seq  atomic.Int64
}

func (h *harness) connect(path string) *mcpSess {
	h.t.Helper()
	r := h.do("POST", path, rpc(0, "initialize", initParams("")))
	id := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || len(r.msgs) != 1 || r.msgs[0].Result == nil || !uuidV4.MatchString(id) {
		h.t.Fatalf("initialize %s: %s", path, r)
	}
	if n := h.do("POST", path, rpc(nil, "notifications/initialized", nil), "Mcp-Session-Id", id); n.status != http.StatusAccepted {
		h.t.Fatalf("notifications/initialized %s: %s", path, n)
	}
	return &mcpSess{h: h, path: path, id: id}
}

func (s *mcpSess) send(method string, params any) (*resp, error) {
	return s.h.send("POST", s.path, rpc(s.seq.Add(1), method, params), "Mcp-Session-Id", s.id)
}

// callTool calls a tool and returns its result, or an error for anything
// else (usable from any goroutine).
func (s *mcpSess) callTool(name string, args any) (toolOut, error) {
	if args == nil {
		args = map[string]any{}
	}
	r, err := s.send("tools/call", toolParams(name, args, nil))
	if err != nil {
		return toolOut{}, err
	}
	if r.status != 200 || len(r.msgs) == 0 || r.msgs[len(r.msgs)-1].Error != nil {
		return toolOut{}, fmt.Errorf("%s %s: %s", s.path, name, r)
	}
	out, err := decodeTool(r.msgs[len(r.msgs)-1])
	if err == nil && out.IsError {
		err = fmt.Errorf("%s %s: tool error %q", s.path, name, out.Text)
	}
	return out, err
}

func (s *mcpSess) tool(name string, args any) toolOut {
	s.h.t.Helper()
	out, err := s.callTool(name, args)
	if err != nil {
		s.h.t.Fatal(err)
	}
	return out
}

func (s *mcpSess) listen() *stream {
	s.h.t.Helper()
	st := s.h.open("GET", s.path, nil, "Mcp-Session-Id", s.id)
	if st.status != 200 || mediaType(st.header) != "text/event-stream" {
		s.h.t.Fatalf("GET %s: HTTP %d %s", s.path, st.status, st.header.Get("Content-Type"))
	}
	return st
}

// mark has the session's server send a notifications/message with text
// after the response of the call. With no call in flight on the process
// when it arrives, it goes to the GET streams of the sessions on that
// process.
func (s *mcpSess) mark(tool, text string) {
	s.h.t.Helper()
	r, err := s.send("tools/call", toolParams(tool, map[string]any{"after": true, "level": "info", "text": text}, nil))
	if err != nil || r.status != 200 || len(r.msgs) != 1 || r.msgs[0].Result == nil {
		s.h.t.Fatalf("marker %s: %v %v", text, err, r)
	}
}

// untilMark reads st (the GET stream of name) up to the marker text and
// returns the other messages before it (other markers excepted).
func untilMark(st *stream, name, text string) []string {
	st.t.Helper()
	var got []string
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	for {
		var ev sseEvent
		select {
		case ev = <-st.events:
		case <-st.ended:
			st.t.Fatalf("%s: the stream ended while waiting for %s (got %v)", name, text, got)
		case <-timer.C:
			st.t.Fatalf("%s: no %s within %s (got %v)", name, text, waitFor, got)
		}
		var m wireMsg
		if err := json.Unmarshal(ev.data, &m); err != nil {
			st.t.Fatalf("%s: event is not JSON-RPC: %s", name, ev.data)
		}
		if m.Method == "notifications/message" {
			var p struct{ Data string }
			_ = json.Unmarshal(m.Params, &p)
			if p.Data == text {
				return got
			}
			if strings.HasPrefix(p.Data, "marker-") {
				continue
			}
		}
		got = append(got, describe(m))
	}
}

// ---------------------------------------------------------------------------
// Load: goroutines calling tools continuously, counting and signalling.

type load struct {
	t *testing.T
	// gate is held (read) by every call; pause takes it to have no call
	// in flight.
	gate   sync.RWMutex
	mu     sync.Mutex
	names  []string
	counts []int
	errs   []string
	signal chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newLoad(t *testing.T) *load {
	l := &load{t: t, signal: make(chan struct{}), stop: make(chan struct{})}
	t.Cleanup(func() { l.finish() })
	return l
}

// add starts a worker that runs call until the load is finished; every
// error is a failure of the test.
func (l *load) add(name string, call func(n int) error) {
	l.mu.Lock()
	i := len(l.counts)
	l.names = append(l.names, name)
	l.counts = append(l.counts, 0)
	l.mu.Unlock()
	l.wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-l.stop:
				return
			default:
			}
			l.gate.RLock()
			err := call(n)
			l.gate.RUnlock()
			l.mu.Lock()
			l.counts[i]++
			if err != nil && len(l.errs) < 50 {
				l.errs = append(l.errs, fmt.Sprintf("%s call %d at %s: %v", name, n, time.Now().Format("15:04:05.000"), err))
			}
			close(l.signal)
			l.signal = make(chan struct{})
			l.mu.Unlock()
		}
	})
}

// pause waits for the calls in flight to end and holds the next ones
// until the returned function is called.
func (l *load) pause() (resume func()) {
	l.gate.Lock()
	return l.gate.Unlock
}

// progress waits until every worker has made n more calls.
func (l *load) progress(n int) {
	l.t.Helper()
	l.mu.Lock()
	want := make([]int, len(l.counts))
	for i, c := range l.counts {
		want[i] = c + n
	}
	l.mu.Unlock()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		sig, behind := l.signal, ""
		for i, c := range l.counts {
			if c < want[i] {
				behind = l.names[i]
			}
		}
		l.mu.Unlock()
		if behind == "" {
			return
		}
		select {
		case <-sig:
		case <-deadline.C:
			l.t.Fatalf("worker %s made no progress within %s", behind, waitFor)
		}
	}
}

// finish stops the workers, waits for them and reports their failures.
// It returns the number of calls made.
func (l *load) finish() int {
	l.mu.Lock()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		l.t.Errorf("failed call under load: %s", e)
	}
	l.errs = nil
	total := 0
	for _, c := range l.counts {
		total += c
	}
	return total
}

// echoWorker calls tool (an echo) on s and checks the answer comes from
// process pid.
func echoWorker(s *mcpSess, tool string, pid int) func(int) error {
	return func(n int) error {
		text := fmt.Sprintf("%s-%s-%d", s.id[:8], tool, n)
		out, err := s.callTool(tool, map[string]any{"text": text})
		switch {
		case err != nil:
			return err
		case out.Text != text:
			return fmt.Errorf("%s: sent %q, got %q", tool, text, out.Text)
		case out.PID != pid:
			return fmt.Errorf("%s: answered by pid %d, want %d (the process was replaced)", tool, out.PID, pid)
		}
		return nil
	}
}

// ===========================================================================

// Hot reload under load: while goroutines call tools on unchanged
// destinations (their own sessions and the aggregated /mcp session),
// destinations are added, changed and removed, an invalid config is pushed,
// then a config that changes nothing. No call to an unchanged destination
// fails, their processes and sessions and every open stream of theirs stay,
// the aggregated session is told its tools changed (and nothing else is
// told anything), changed destinations get new processes, removed ones are
// gone, and /healthz tracks every reload.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	const top = fastRestart + "max_sessions: 50\n"
	keep := dest{name: "keep", mode: "plain"}
	keepses := dest{name: "keepses", mode: "plain", isolation: "session"}
	change1 := dest{name: "change", mode: "plain", env: map[string]string{"GENERATION": "1"}}
	change2 := dest{name: "change", mode: "plain", env: map[string]string{"GENERATION": "2"}}
	gone := dest{name: "gone", mode: "plain"}
	added := dest{name: "added", mode: "plain"}

	h, cf := startFile(t, gateway.Options{}, top, keep, keepses, change1, gone)
	hz := h.health()
	if !slices.Equal(hz.names(), []string{"change", "gone", "keep", "keepses"}) || !hz.LastReload.OK {
		t.Fatalf("healthz at start: %s", hz)
	}
	loaded := hz

	sKeep, sKeepSes, sChange, sGone := h.connect("/keep/mcp"), h.connect("/keepses/mcp"), h.connect("/change/mcp"), h.connect("/gone/mcp")
	agg := h.connect("/mcp")
	lKeep, lKeepSes, lChange, lGone, lAgg := sKeep.listen(), sKeepSes.listen(), sChange.listen(), sGone.listen(), agg.listen()
	keepPID, keepsesPID := sKeep.tool("pid", nil).PID, sKeepSes.tool("pid", nil).PID
	changePID, gonePID := sChange.tool("pid", nil).PID, sGone.tool("pid", nil).PID
	if p := agg.tool("keep__pid", nil).PID; p != keepPID {
		t.Fatalf("aggregated keep on pid %d, the destination's shared process is %d", p, keepPID)
	}
	aggKeepsesPID := agg.tool("keepses__pid", nil).PID
	if aggKeepsesPID == keepsesPID {
		t.Fatal("isolation session: the aggregated session shares a process with another session")
	}
	if p := agg.tool("change__pid", nil).PID; p != changePID {
		t.Fatalf("aggregated change on pid %d, want %d", p, changePID)
	}

	ld := newLoad(t)
	ld.add("keep", echoWorker(sKeep, "echo", keepPID))
	ld.add("agg keep__echo", echoWorker(agg, "keep__echo", keepPID))
	ld.add("keepses", echoWorker(sKeepSes, "echo", keepsesPID))
	ld.add("agg keepses__echo", echoWorker(agg, "keepses__echo", aggKeepsesPID))
	ld.progress(3)

	// step applies a config and waits for the n-th reload, with calls in
	// flight throughout; it returns the log record and /healthz after it.
	reloads := 0
	step := func(what, yml string) (logRec, *health) {
		t.Helper()
		cf.write(yml)
		reloads++
		recs := h.logs.waitCount(t, slog.LevelInfo, "config reloaded", reloads)
		if len(recs) != reloads {
			t.Fatalf("%s: %d reloads, want %d: %+v", what, len(recs), reloads, recs)
		}
		ld.progress(3) // calls went on across the reload
		hz := h.health()
		if !hz.LastReload.OK || !hz.loadedAt().After(loaded.loadedAt()) {
			t.Fatalf("%s: healthz %s, want last_reload ok and a config_loaded_at after %s", what, hz, loaded.ConfigLoaded)
		}
		loaded = hz
		return recs[len(recs)-1], hz
	}
	// told checks what each open stream of the unchanged destinations and
	// the aggregated session received since the last check: wantAgg says
	// whether the aggregated client got tools/list_changed; the
	// destinations' own clients must have got nothing.
	markers := 0
	told := func(what string, wantAgg bool) {
		t.Helper()
		markers++
		m1, m2 := fmt.Sprintf("marker-%d-keep", markers), fmt.Sprintf("marker-%d-keepses", markers)
		// Calls are held meanwhile: a log line is routed to the call in
		// flight on its process, if any, and the server writes it just
		// after its response, when the next call may have begun.
		var got []string
		func() {
			defer ld.pause()()
			sKeep.mark("log", m1) // the shared process: reaches lKeep and lAgg
			sKeepSes.mark("log", m2)
			if got := untilMark(lKeep, "keep", m1); len(got) != 0 {
				t.Errorf("%s: keep's own client got %v", what, got)
			}
			if got := untilMark(lKeepSes, "keepses", m2); len(got) != 0 {
				t.Errorf("%s: keepses's own client got %v", what, got)
			}
			got = untilMark(lAgg, "/mcp", m1)
		}()
		listChanged := slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, `"notifications/tools/list_changed"`) })
		if listChanged != wantAgg || (!wantAgg && len(got) != 0) {
			t.Errorf("%s: the aggregated client got %v; want tools/list_changed: %v", what, got, wantAgg)
		}
	}
	told("before any reload", false)

	// Add.
	rec, hz := step("add", cf.yaml(top, keep, keepses, change1, gone, added))
	if !strings.Contains(rec.Attrs, "added=[added] changed=[] removed=[] unchanged=4") {
		t.Errorf("add: logged %q", rec.Attrs)
	}
	if !slices.Equal(hz.names(), []string{"added", "change", "gone", "keep", "keepses"}) {
		t.Fatalf("add: healthz %s", hz)
	}
	told("add", true)
	addedPID := agg.tool("added__pid", nil).PID
	if p := h.connect("/added/mcp").tool("pid", nil).PID; p != addedPID {
		t.Fatalf("added: a new session is on pid %d, the aggregated one on %d", p, addedPID)
	}

	// Change.
	rec, _ = step("change", cf.yaml(top, keep, keepses, change2, gone, added))
	if !strings.Contains(rec.Attrs, "added=[] changed=[change] removed=[] unchanged=4") {
		t.Errorf("change: logged %q", rec.Attrs)
	}
	told("change", true)
	lChange.expectEnd() // the changed destination's sessions end…
	if r, _ := sChange.send("tools/list", nil); r == nil || r.status != 404 {
		t.Errorf("a session of the changed destination: %v, want 404", r)
	}
	waitGone(t, waitFor, changePID) // …and its old process stops
	newChange := h.connect("/change/mcp").tool("pid", nil).PID
	if newChange == changePID {
		t.Fatal("change: the changed destination kept its process")
	}
	if p := agg.tool("change__pid", nil).PID; p != newChange {
		t.Fatalf("change: the aggregated session reaches pid %d, want the new %d", p, newChange)
	}

	// Remove.
	rec, hz = step("remove", cf.yaml(top, keep, keepses, change2, added))
	if !strings.Contains(rec.Attrs, "added=[] changed=[] removed=[gone] unchanged=4") {
		t.Errorf("remove: logged %q", rec.Attrs)
	}
	if !slices.Equal(hz.names(), []string{"added", "change", "keep", "keepses"}) {
		t.Fatalf("remove: healthz %s", hz)
	}
	told("remove", true)
	lGone.expectEnd()
	waitGone(t, waitFor, gonePID)
	if r := h.do("POST", "/gone/mcp", rpc(1, "initialize", initParams(""))); r.status != 404 {
		t.Fatalf("a removed destination: %s, want 404", r)
	}
	if out, err := agg.callTool("gone__echo", map[string]any{"text": "x"}); err == nil {
		t.Fatalf("the aggregated session still reaches the removed destination: %+v", out)
	}

	// Invalid: rejected whole, logged, reported; the old config serves on.
	valid := cf.yaml(top, keep, keepses, change2, added)
	before := h.health()
	cf.write(valid + "  broken:\n    type: stdio\n")
	rej := h.logs.waitCount(t, slog.LevelError, "config reload rejected; the running config keeps serving", 1)
	if !strings.Contains(rej[0].Attrs, "command is required") {
		t.Errorf("rejection logged as %q", rej[0].Attrs)
	}
	ld.progress(3)
	hz = h.health()
	if hz.LastReload.OK || !strings.Contains(hz.LastReload.Error, "command is required") || hz.LastReload.Time.Before(before.LastReload.Time) {
		t.Errorf("invalid config: healthz last_reload %+v, want ok false with the error", hz.LastReload)
	}
	if hz.ConfigLoaded != before.ConfigLoaded || !slices.Equal(hz.names(), before.names()) {
		t.Errorf("invalid config: healthz %s, want the running config as before: %s", hz, before)
	}
	told("invalid config", false)
	if p := h.connect("/added/mcp").tool("pid", nil).PID; p != addedPID {
		t.Fatalf("after the invalid config: added on pid %d, want %d", p, addedPID)
	}
	if got := h.logs.count(slog.LevelInfo, "config reloaded"); got != reloads {
		t.Fatalf("the invalid config was applied: %d reloads", got)
	}

	// The valid config again: a reload that changes nothing touches nothing.
	rec, hz = step("unchanged", valid)
	if !strings.Contains(rec.Attrs, "added=[] changed=[] removed=[] unchanged=4") {
		t.Errorf("no change: logged %q", rec.Attrs)
	}
	if !slices.Equal(hz.names(), before.names()) || hz.LastReload.Error != "" {
		t.Fatalf("no change: healthz %s", hz)
	}
	told("no change", false)

	calls := ld.finish()
	for _, p := range []int{keepPID, keepsesPID, aggKeepsesPID, addedPID, newChange} {
		if !alive(p) {
			t.Errorf("pid %d is gone", p)
		}
	}
	// Every process: keep, keepses ×2, change, added.
	if p := h.procs(); len(p) != 5 {
		t.Errorf("processes %v, want 5", p)
	}
	t.Logf("%d calls under load across %d reloads and one rejected config", calls, reloads)
}

// An edit made after the config was loaded but before Serve began watching
// is applied all the same.
func TestReloadEditBeforeServe(t *testing.T) {
	t.Parallel()
	cf := &cfgFile{t: t, path: filepath.Join(t.TempDir(), "switchboard.yaml"), tag: newTag(t)}
	a, b := dest{name: "a", mode: "plain"}, dest{name: "b", mode: "plain"}
	cf.write(cf.yaml(fastRestart, a))
	cfg, err := config.Load(cf.path)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := serveConfig(t, cf.tag, cfg, gateway.Options{ConfigPath: cf.path, ReloadInterval: 50 * time.Millisecond},
		func() { cf.write(cf.yaml(fastRestart, a, b)) })
	rec := h.logs.waitCount(t, slog.LevelInfo, "config reloaded", 1)[0]
	if !strings.Contains(rec.Attrs, "added=[b]") {
		t.Fatalf("reload logged as %q", rec.Attrs)
	}
	h.connect("/b/mcp").tool("echo", map[string]any{"text": "b"})
}

// A reload that comes once shutdown has begun (a SIGHUP racing SIGTERM)
// is ignored: it must not start processes that nothing would stop.
func TestReloadAfterShutdownIgnored(t *testing.T) {
	t.Parallel()
	a := dest{name: "a", mode: "plain"}
	h, cf := startFile(t, gateway.Options{NoReload: true}, fastRestart, a)
	h.connect("/a/mcp").tool("pid", nil)
	h.stop()
	t.Cleanup(func() { waitGone(t, 5*time.Second, h.procs()...) }) // kills what leaked
	cf.write(cf.yaml(fastRestart, a, dest{name: "late", mode: "plain"}))
	if err := cf.g.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	h.logs.wait(t, slog.LevelWarn, "config reload ignored: switchboard is shutting down", "")
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/healthz", nil)
	req.Host = "127.0.0.1"
	cf.g.Handler().ServeHTTP(w, req)
	hz := &health{raw: w.Body.Bytes()}
	if err := json.Unmarshal(w.Body.Bytes(), hz); err != nil || !slices.Equal(hz.names(), []string{"a"}) {
		t.Fatalf("after a reload during shutdown: %s", hz)
	}
	if p := h.procs(); len(p) != 0 {
		t.Fatalf("processes after shutdown: %v", p)
	}
}

// ---------------------------------------------------------------------------
// The real binary: --no-reload and SIGHUP.

// buildSwitchboard builds cmd/switchboard into dir.
func buildSwitchboard(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "switchboard")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/switchboard-mcp/switchboard/cmd/switchboard").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// binGateway is a running switchboard binary; its log lines signal.
type binGateway struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	base   string
	client *http.Client
	exited chan error

	mu     sync.Mutex
	lines  []string
	signal chan struct{}
}

var listenRE = regexp.MustCompile(`msg="switchboard listening" addr=(\S+)`)

func runSwitchboard(t *testing.T, name, bin string, args ...string) *binGateway {
	t.Helper()
	b := &binGateway{t: t, name: name, exited: make(chan error, 1), signal: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * waitFor}}
	b.cmd = exec.Command(bin, args...)
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	b.cmd.Stderr, b.cmd.Stdout = pw, pw
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.exited <- b.cmd.Wait(); pw.Close() }()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			b.mu.Lock()
			b.lines = append(b.lines, sc.Text())
			close(b.signal)
			b.signal = make(chan struct{})
			b.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		_ = b.cmd.Process.Kill() // a no-op once it has exited
		if t.Failed() {
			b.mu.Lock()
			t.Logf("%s output:\n%s", name, strings.Join(b.lines, "\n"))
			b.mu.Unlock()
		}
	})
	m := b.waitLine("the listen address", listenRE.MatchString)
	b.base = "http://" + listenRE.FindStringSubmatch(m)[1]
	return b
}

// count returns the number of log lines containing s.
func (b *binGateway) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// waitLine waits for a log line that satisfies ok; it fails if the
// process exits first.
func (b *binGateway) waitLine(what string, ok func(string) bool) string {
	b.t.Helper()
	return b.waitLines(what, 1, ok)
}

// waitLines waits for the n-th log line that satisfies ok.
func (b *binGateway) waitLines(what string, n int, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.NewTimer(3 * waitFor)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		sig, seen := b.signal, 0
		for _, l := range b.lines {
			if ok(l) {
				if seen++; seen == n {
					b.mu.Unlock()
					return l
				}
			}
		}
		b.mu.Unlock()
		select {
		case <-sig:
		case err := <-b.exited:
			b.exited <- err
			b.t.Fatalf("%s exited (%v) waiting for %s", b.name, err, what)
		case <-deadline.C:
			b.t.Fatalf("%s: no log line for %s", b.name, what)
		}
	}
}

func (b *binGateway) health() *health { b.t.Helper(); return fetchHealth(b.t, b.client, b.base) }

// tool opens a session on /{d}/mcp and calls a tool.
func (b *binGateway) tool(d, name string) (toolOut, error) {
	post := func(sid string, body []byte) (*http.Response, []byte, error) {
		req, _ := http.NewRequest("POST", b.base+"/"+d+"/mcp", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		r, err := b.client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer r.Body.Close()
		body, err = io.ReadAll(r.Body)
		return r, body, err
	}
	r, body, err := post("", rpc(1, "initialize", initParams("")))
	if err != nil {
		return toolOut{}, err
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if r.StatusCode != 200 || sid == "" {
		return toolOut{}, fmt.Errorf("initialize /%s/mcp: HTTP %d %s", d, r.StatusCode, body)
	}
	if r, body, err = post(sid, rpc(nil, "notifications/initialized", nil)); err != nil || r.StatusCode != 202 {
		return toolOut{}, fmt.Errorf("initialized: %v %s", err, body)
	}
	if r, body, err = post(sid, rpc(2, "tools/call", toolParams(name, map[string]any{}, nil))); err != nil {
		return toolOut{}, err
	}
	var m wireMsg
	if r.StatusCode != 200 || json.Unmarshal(body, &m) != nil {
		return toolOut{}, fmt.Errorf("tools/call: HTTP %d %s", r.StatusCode, body)
	}
	return decodeTool(m)
}

// stop sends SIGTERM and waits for exit 0.
func (b *binGateway) stop() {
	b.t.Helper()
	b.client.CloseIdleConnections()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.t.Fatal(err)
	}
	select {
	case err := <-b.exited:
		if err != nil {
			b.t.Errorf("%s exited with %v after SIGTERM, want 0", b.name, err)
		}
	case <-time.After(2 * waitFor):
		b.t.Errorf("%s did not exit within %s of SIGTERM", b.name, 2*waitFor)
	}
}

// serve --no-reload: an edited config file changes nothing (while a
// control instance watching the same edit reloads it) until SIGHUP, which
// applies it — keeping the unchanged destination's process — or, for an
// invalid file, rejects it and serves on.
func TestReloadSIGHUPWithNoReload(t *testing.T) {
	t.Parallel()
	bin := buildSwitchboard(t)
	tag := newTag(t)
	const top = "listen: 127.0.0.1:0\nrestart:\n  delays: [20ms]\n"
	a, b := dest{name: "a", mode: "plain"}, dest{name: "b", mode: "plain"}
	files := map[string]*cfgFile{}
	for _, n := range []string{"quiet", "control"} {
		cf := &cfgFile{t: t, path: filepath.Join(t.TempDir(), "switchboard.yaml"), tag: tag}
		cf.write(cf.yaml(top, a))
		files[n] = cf
	}
	t.Cleanup(func() { waitGone(t, 5*time.Second, procsWithEnv(envServerTag+"="+tag)...) })
	quiet := runSwitchboard(t, "switchboard --no-reload", bin, "serve", "--config", files["quiet"].path, "--no-reload", "--reload-interval", "50ms")
	control := runSwitchboard(t, "switchboard (watching)", bin, "serve", "--config", files["control"].path, "--reload-interval", "0.05")

	hz0 := quiet.health()
	if !slices.Equal(hz0.names(), []string{"a"}) || !hz0.LastReload.OK {
		t.Fatalf("healthz at start: %s", hz0)
	}
	before, err := quiet.tool("a", "pid")
	if err != nil {
		t.Fatal(err)
	}

	// The same edit to both files: the watching instance reloads it, which
	// shows the edit was there to be seen for a full reload interval.
	for _, cf := range files {
		cf.write(cf.yaml(top, a, b))
	}
	control.waitLine("the control's reload", func(l string) bool {
		return strings.Contains(l, `msg="config reloaded"`) && strings.Contains(l, "added=[b]")
	})
	if hz := control.health(); !slices.Equal(hz.names(), []string{"a", "b"}) {
		t.Fatalf("the control instance did not reload: %s", hz)
	}
	hz := quiet.health()
	if !slices.Equal(hz.names(), []string{"a"}) || hz.ConfigLoaded != hz0.ConfigLoaded || !hz.LastReload.Time.Equal(hz0.LastReload.Time) {
		t.Fatalf("--no-reload: the edit was applied without SIGHUP: %s", hz)
	}
	if _, err := quiet.tool("b", "pid"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("--no-reload: /b/mcp before SIGHUP: %v, want 404", err)
	}
	if n := quiet.count("config reload"); n != 0 {
		t.Fatalf("--no-reload: %d reload log lines before SIGHUP", n)
	}

	// SIGHUP applies it.
	if err := quiet.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	quiet.waitLine("the reload on SIGHUP", func(l string) bool {
		return strings.Contains(l, `msg="config reloaded"`) && strings.Contains(l, "added=[b]") && strings.Contains(l, "unchanged=1")
	})
	hz = quiet.health()
	if !slices.Equal(hz.names(), []string{"a", "b"}) || !hz.LastReload.OK || hz.ConfigLoaded == hz0.ConfigLoaded {
		t.Fatalf("after SIGHUP: %s", hz)
	}
	if out, err := quiet.tool("b", "echo"); err != nil {
		t.Fatalf("after SIGHUP: b: %v %+v", err, out)
	}
	if after, err := quiet.tool("a", "pid"); err != nil || after.PID != before.PID {
		t.Fatalf("after SIGHUP: a is on pid %d (%v), was %d", after.PID, err, before.PID)
	}

	// An invalid file on SIGHUP is rejected; the running config serves on.
	files["quiet"].write("destinations:\n  a: {type: stdio}\n")
	if err := quiet.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	quiet.waitLine("the rejection", func(l string) bool {
		return strings.Contains(l, "level=ERROR") && strings.Contains(l, `msg="config reload rejected; the running config keeps serving"`)
	})
	hz2 := quiet.health()
	if hz2.LastReload.OK || !strings.Contains(hz2.LastReload.Error, "command is required") ||
		hz2.ConfigLoaded != hz.ConfigLoaded || !slices.Equal(hz2.names(), []string{"a", "b"}) {
		t.Fatalf("after an invalid SIGHUP: %s", hz2)
	}
	if after, err := quiet.tool("a", "pid"); err != nil || after.PID != before.PID {
		t.Fatalf("after an invalid SIGHUP: a is on pid %d (%v), was %d", after.PID, err, before.PID)
	}

	quiet.stop()
	control.stop()
}
