package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-mcp/switchboard/internal/peertest"
)

// chromiumPath finds Debian's chromium ($SWITCHBOARD_CHROMIUM first). A
// missing one skips the test, or fails it under SWITCHBOARD_REQUIRE_PEERS=1
// (CI, ./scripts/test.sh), where .ci/run installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SWITCHBOARD_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	msg := "chromium not found (apt-get install --no-install-recommends chromium, or set SWITCHBOARD_CHROMIUM)"
	if peertest.Required() {
		t.Fatal(msg + " (SWITCHBOARD_REQUIRE_PEERS=1)")
	}
	t.Skip(msg)
	return ""
}

// artifactDir is where a test leaves files for a person to look at:
// $SWITCHBOARD_ARTIFACTS when set, else the test's temporary directory.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("SWITCHBOARD_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// browser starts a headless chromium for the test and returns its context;
// every message the page writes to the console is collected. At cleanup
// the browser is stopped and each of its processes (found by an
// environment tag they inherit) must be gone.
func browser(t *testing.T) (context.Context, func() []chromedp.ConsoleMessage) {
	t.Helper()
	exe := chromiumPath(t)
	tag := "SWITCHBOARD_TEST_BROWSER=" + newTag(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 1000), chromedp.Env(tag),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // start the browser and its first tab
		cancel()
		cancelAlloc()
		t.Fatalf("chromium: %v", err)
	}
	pid := chromedp.FromContext(ctx).Browser.Process().Pid
	var mu sync.Mutex
	var msgs []chromedp.ConsoleMessage
	collected := make(chan struct{})
	console := chromedp.Console(ctx)
	go func() { // ends when ctx is cancelled
		defer close(collected)
		for m, err := range console {
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, m)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // kills the browser by PID and waits for it
		<-collected
		left := append(procsWithEnv(tag), pid)
		waitGone(t, 10*time.Second, left...)
		for _, p := range procsWithEnv(tag) { // a helper that outlived the browser
			_ = syscall.Kill(p, syscall.SIGKILL)
			t.Errorf("chromium process %d outlived the browser; killed", p)
		}
	})
	return ctx, func() []chromedp.ConsoleMessage {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(msgs)
	}
}

// TestStatusUIChromium loads /ui in headless Chromium: it renders with no
// console error (scripts, styles, CSP and the data all load), shows every
// destination with its chart of calls/s and p99 (calls through /mcp/dev
// counted for the member that served them), the last errors with identical
// ones grouped, the last reload and the tools of each aggregated view with
// the prefixes its members set, and reflects a killed upstream (the stdio
// child killed by PID) within 3 s. A screenshot is saved in the artifacts.
func TestStatusUIChromium(t *testing.T) {
	skipInteropShort(t)
	const tagEnv = "SWITCHBOARD_TEST_DEST"
	h := startAgg(t, "restart: {delays: [5s]}\n",
		"namespaces:\n  dev: {servers: [a, b], tool_prefix: conflict, tools: {deny: [\"crash\", \"big\"]}}\n"+
			"  own: {servers: [a], isolated: true, prefix: {a: x}}\n",
		dest{name: "a", mode: "plain", env: map[string]string{tagEnv: "a"}},
		dest{name: "b", mode: "plain", env: map[string]string{tagEnv: "b"}})
	sa, sb := h.initialize("a", "{}"), h.initialize("b", "{}")
	for _, s := range []*sess{sa, sb} {
		if r := s.call("tools/list", nil); r.status != 200 {
			t.Fatalf("tools/list: %s", r)
		}
	}
	for i := range 5 {
		sa.tool("echo", map[string]any{"text": fmt.Sprint("hi ", i)})
	}
	for range 3 { // one error three times: one row, ×3
		if r := sa.call("tools/call", toolParams("no-such-tool", map[string]any{}, nil)); r.status != 200 || r.last(t).Error == nil {
			t.Fatalf("unknown tool: %s", r)
		}
	}

	ctx, console := browser(t)
	run := func(what string, timeout time.Duration, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := chromedp.Do(c, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run("load /ui", waitFor, chromedp.Navigate(h.url("/ui")))
	run("destinations shown", waitFor, chromedp.WaitVisible(`tr[data-destination="b"]`))
	rowState := func(d string) string {
		return fmt.Sprintf(`document.querySelector('tr[data-destination="%s"] td:nth-child(3)')?.textContent`, d)
	}
	run("both ready, live", waitFor, poll(rowState("a")+` === "ready" && `+rowState("b")+` === "ready" && `+
		`document.getElementById("live").dataset.state === "live"`))
	run("calls counted", waitFor, poll(`document.querySelector('tr[data-destination="a"] td:nth-child(10)')?.textContent === "10"`))
	run("the last error shown once, grouped", waitFor, poll(`(() => {
		const rows = [...document.querySelectorAll("#errors tbody tr")].filter(tr => tr.textContent.includes("unknown tool no-such-tool"));
		return rows.length === 1 && rows[0].dataset.count === "3" && rows[0].textContent.includes("×3");
	})()`))
	// b's calls go through the aggregated /mcp/dev: counted and charted as b's.
	dev, r1 := h.initAt("/mcp/dev")
	if dev == nil {
		t.Fatalf("initialize /mcp/dev: %s", r1)
	}
	for i := range 4 {
		dev.echo("b__echo", fmt.Sprint("via dev ", i))
	}
	run("b's calls through /mcp/dev counted for b", waitFor, poll(`document.querySelector('tr[data-destination="b"] td:nth-child(10)')?.textContent === "6"`)) // + its own initialize and tools/list
	run("b's chart drawn", waitFor, poll(`(() => {
		const line = document.querySelector('svg[data-chart="b"] polyline.rate');
		if (!line || line.points.numberOfItems !== 30) return false;
		const ys = Array.from({length: 30}, (_, i) => line.points.getItem(i).y);
		return Math.min(...ys) < Math.max(...ys) && document.querySelector('svg[data-chart="b"] polyline.p99') !== null;
	})()`))
	run("a member's own prefix shown", waitFor, poll(`document.querySelector('[data-view="/mcp/own"] .muted')?.textContent.includes("tool_prefix: always; a: x")`))
	run("the merged tools of dev", waitFor, poll(`[...document.querySelectorAll('[data-view="/mcp/dev"] .tool')].map(e => e.textContent).includes("a__echo")`))
	devTools := evaluate[[]string](t, ctx, `[...document.querySelectorAll('[data-view="/mcp/dev"] .tool')].map(e => e.textContent)`)
	if slices.Contains(devTools, "a__crash") || slices.Contains(devTools, "b__big") {
		t.Errorf("dev shows tools its filter denies: %v", devTools)
	}
	if !slices.Contains(devTools, "b__echo") || len(devTools) != 2*11 {
		t.Errorf("dev tools = %v; want each server's 11 admitted tools, prefixed (tool_prefix conflict, all collide)", devTools)
	}

	// A client's tools/list on the view itself replaces the derived list.
	agg, r0 := h.initAt("/mcp/dev")
	if agg == nil {
		t.Fatalf("initialize /mcp/dev: %s", r0)
	}
	if r := h.do("POST", "/mcp/dev", rpc(1, "tools/list", nil), "Mcp-Session-Id", agg.id); r.status != 200 {
		t.Fatalf("tools/list on /mcp/dev: %s", r)
	}
	run("the view's own listing", waitFor, poll(`document.querySelector('[data-view="/mcp/dev"] .note')?.textContent.includes("as this view last listed them")`))

	pids := procsWithEnv(tagEnv + "=a")
	if len(pids) != 1 {
		t.Fatalf("destination a runs %d processes (%v); want 1", len(pids), pids)
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run("a killed upstream shown within 3 s", 3*time.Second, poll(rowState("a")+` === "restarting" && `+
		`document.querySelector('tr[data-destination="a"] [data-field="restarts"]')?.textContent === "1"`))
	t.Logf("the page showed the killed upstream %v after the kill", time.Since(killed).Round(time.Millisecond))
	if got := evaluate[string](t, ctx, rowState("b")); got != "ready" {
		t.Errorf("destination b shows %q after a's child was killed; want ready", got)
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactDir(t), "statusui.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	for _, m := range console() {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleWarning {
			t.Errorf("console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line)
		}
	}
	// The data the page shows is the JSON endpoint's.
	r := h.do("GET", "/ui/status.json", nil)
	var st struct {
		Destinations []struct{ Name, State string }
	}
	if err := json.Unmarshal(r.body, &st); err != nil || len(st.Destinations) != 2 {
		t.Fatalf("/ui/status.json: %v %s", err, r)
	}
	if csp := h.do("GET", "/ui", nil).header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("/ui CSP = %q", csp)
	}
}

// poll waits, in the page, until the JavaScript expression is truthy.
func poll(expr string) chromedp.Action[chromedp.Void] {
	p := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		v, err := p(ctx, t)
		if err != nil {
			return v, fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return v, nil
	}
}

func evaluate[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}
