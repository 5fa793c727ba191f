// Package gate puts package guard's checks on one destination's request
// path. A Gate wraps the destination as every surface reaches it: the
// fronts of /{d}/mcp (Open, Stateless) and the routers of the aggregated
// views, whose members join it (Join) — /mcp, the stdio front and code
// mode's scripts alike. So each check has one place:
//
//   - lists: each listed tool is compared with the destination's pins
//     (monitor audits the diff, block drops it) and its strings are run
//     through the description detectors (monitor, strip, or block: dropped
//     and its calls refused); unapproved instructions leave InitializeResult;
//   - calls: a tool not approved is refused in block mode; the detectors
//     run over the arguments and the result (guard.Walk), less what the
//     tool's scope allows, and the action monitors, redacts or blocks;
//   - catalogs: a view's router hands the gate what guard.CheckCatalog
//     found against its tools (Shadowed); block leaves them out of it.
//
// Detections are audited (rule and place, never the text) and counted
// (Options.Detected). Update replaces the settings (a reload, an
// approval): live sessions are told notifications/tools/list_changed.
// Without guards the gateway does not wrap the destination at all.
package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/guard"
	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/session"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Server is what a Gate guards: a destination as the fronts and the
// routers use it.
type Server interface {
	Name() string
	Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
	Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error)
	Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error)
}

// Detector is a named guard.Detector ("hidden", "markup", "secrets",
// "pii").
type Detector struct {
	Name string
	guard.Detector
}

// Settings are a Gate's checks. The zero value checks nothing. A Settings
// given to New or Update must not be changed afterwards.
type Settings struct {
	// Pinning is guard.Off, guard.Monitor or guard.Block.
	Pinning guard.Mode
	// Pins are the destination's approvals (a copy; nil Tools: none).
	Pins guard.ServerPins
	// Detectors run over tools/call arguments and results; none: no scan.
	Detectors []Detector
	// Action is what a detection does: guard.Monitor (zero: the same),
	// guard.Redact or guard.Block.
	Action guard.Mode
	// MaxBytes caps the string bytes scanned per message; zero: 1 MiB.
	MaxBytes int
	// Hook is the external classifier asked about calls (hook.go); nil:
	// none, nothing leaves the gateway.
	Hook *Hook

	// Tools scope the detectors per tool (by the server's name for it);
	// a tool not in it takes Action and every finding. Nil: none.
	Tools map[string]ToolSettings

	// Descriptions is what a listed tool whose strings (name, title,
	// description, schemas, annotations) DescriptionDetectors flag gets:
	// guard.Off (not checked), guard.Monitor (an audit record),
	// guard.Strip (the flagged spans removed from the tool as listed) or
	// guard.Block (the tool left out of lists and its calls refused).
	Descriptions guard.Mode
	// DescriptionDetectors check listed tools (hidden characters,
	// markup); none: no check.
	DescriptionDetectors []guard.Detector
	// Shadowing is what a tool of this destination gets when an
	// aggregated catalog finds it shadowing another server's
	// (guard.CheckCatalog, through Shadowed): guard.Off, guard.Monitor (an
	// audit record) or guard.Block (left out of that catalog).
	Shadowing guard.Mode
}

// ToolSettings scope the detectors on one tool's calls.
type ToolSettings struct {
	// Action replaces Settings.Action for the tool; guard.Off: the
	// destination's.
	Action guard.Mode
	// Allow lets findings through on the tool's calls: a rule ("email",
	// "aws-access-token") or a whole detector as findings name it
	// ("secret", "pii", "hidden", "markup"). Nil: none.
	Allow []string
}

// Options are what a Gate reports to.
type Options struct {
	// Audit receives the gate's own records: a tool's pin standing (with
	// its diff) and detections made outside any request's record. Nil:
	// none.
	Audit func(*audit.Record)
	// Logger is the operational log; nil discards.
	Logger *slog.Logger
	// Detected counts detections (the metric
	// switchboard_guard_detections_total): rule is detector/rule as the
	// rule set names it ("secret/aws-access-token", "hidden/tag",
	// "pin/changed", "shadowing/collision"), never content; action what
	// was done (monitor, strip, redact, block). Called once per finding
	// of a call, and once per tool standing, definition or shadowing as
	// it is audited. Nil: not counted.
	Detected func(rule, action string)
}

// Gate guards one destination. It implements the fronts' Destination and
// the routers' Server; it is safe for concurrent use.
type Gate struct {
	srv  Server
	opts Options
	set  atomic.Pointer[Settings]

	mu       sync.Mutex
	listed   map[string]guard.Definition // the server's definitions as last listed (only Name without pinning); nil: never listed
	instr    *string                     // the server's instructions as last initialized; nil: none
	flagged  map[string]string           // listed tools DescriptionDetectors flagged -> what they found
	reported map[string]string           // tool (or a check's key) -> what was last audited (once each)
	live     map[*backend]struct{}       // the sessions joined through the gate
	streams  map[*listening]struct{}     // the 2026-07-28 listen streams asking for tool changes (listen.go)
}

// New returns a Gate over srv with settings s.
func New(srv Server, s *Settings, opts Options) *Gate {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gate{srv: srv, opts: opts, reported: map[string]string{}, live: map[*backend]struct{}{}, streams: map[*listening]struct{}{}}
	g.set.Store(s)
	return g
}

// Name returns the destination's name.
func (g *Gate) Name() string { return g.srv.Name() }

// Settings returns the settings in force.
func (g *Gate) Settings() *Settings { return g.set.Load() }

// Update replaces the settings. When anything a client sees may change
// (the pins, the pinning mode), every live session is sent
// notifications/tools/list_changed, so that it lists again.
func (g *Gate) Update(s *Settings) {
	old := g.set.Swap(s)
	if old.Pinning == s.Pinning && (s.Pinning == guard.Off || reflect.DeepEqual(old.Pins, s.Pins)) &&
		old.Descriptions == s.Descriptions && old.Shadowing == s.Shadowing {
		return
	}
	g.mu.Lock()
	g.reported = map[string]string{}
	live := slices.Collect(maps.Keys(g.live))
	streams := slices.Collect(maps.Keys(g.streams))
	g.mu.Unlock()
	for _, b := range live {
		b.down.Deliver(jsonrpc.NewNotification("notifications/tools/list_changed", nil))
	}
	for _, l := range streams {
		l.changed()
	}
}

// Open attaches a session of the destination's own endpoint.
func (g *Gate) Open(ctx context.Context, s *session.Session, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	return g.Join(ctx, s, init)
}

// Join attaches a downstream (a session, or a router's member) through
// the gate: its calls are checked, and in block mode unapproved
// instructions are left out of the InitializeResult.
func (g *Gate) Join(ctx context.Context, down upstream.Downstream, init *jsonrpc.Message) (session.Backend, *jsonrpc.Message, error) {
	b, res, err := g.srv.Join(ctx, down, init)
	if err != nil {
		return nil, nil, err
	}
	res = g.initialized(res)
	gb := &backend{Backend: b, g: g, down: down}
	g.mu.Lock()
	g.live[gb] = struct{}{}
	g.mu.Unlock()
	return gb, res, nil
}

// Stateless checks and sends a 2026-07-28 request.
func (g *Gate) Stateless(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return g.send(ctx, req, g.srv.Stateless)
}

// backend is a session's backend behind the gate.
type backend struct {
	session.Backend
	g    *Gate
	down upstream.Downstream
}

func (b *backend) Call(ctx context.Context, req *jsonrpc.Message) (session.Call, error) {
	return b.g.send(ctx, req, b.Backend.Call)
}

func (b *backend) Leave() {
	b.g.mu.Lock()
	delete(b.g.live, b)
	b.g.mu.Unlock()
	b.Backend.Leave()
}

type sendFunc func(context.Context, *jsonrpc.Message) (session.Call, error)

// send is the gate on one request.
func (g *Gate) send(ctx context.Context, req *jsonrpc.Message, send sendFunc) (session.Call, error) {
	s := g.set.Load()
	switch req.Method {
	case "subscriptions/listen":
		if s.Pinning == guard.Off {
			return send(ctx, req)
		}
		return g.listen(ctx, req, send)
	case "tools/list":
		if s.Pinning == guard.Off && !s.checksDescriptions() {
			return send(ctx, req)
		}
		c, err := send(ctx, req)
		if err != nil {
			return nil, err
		}
		first := jsonrpc.Member(req.Params, "cursor") == nil
		return &answer{Call: c, fix: func(r json.RawMessage) json.RawMessage { return g.list(s, r, first) }}, nil
	case "tools/call":
		name, _ := req.ParamName()
		if s.Pinning == guard.Block || s.Descriptions == guard.Block && len(s.DescriptionDetectors) > 0 {
			why, err := g.refused(ctx, s, name, send, req)
			if err != nil {
				return nil, err
			}
			if why != "" {
				return refuse(req, "%s", why), nil
			}
		}
		if len(s.Detectors) == 0 && s.Hook == nil {
			return send(ctx, req)
		}
		rec, _ := ctx.Value(audit.RecordKey{}).(*audit.Record)
		ts := s.Tools[name]
		var refusal session.Call
		if len(s.Detectors) > 0 {
			if req, refusal = g.checkArguments(s, ts, req, name, rec); refusal != nil {
				return refusal, nil
			}
		}
		hookNote := func(n string) { g.note(rec, name, n, true) }
		if s.Hook != nil && s.Hook.Arguments {
			if req, refusal = g.hookArguments(ctx, s.Hook, req, name, hookNote); refusal != nil {
				return refusal, nil
			}
		}
		c, err := send(ctx, req)
		if err != nil {
			return nil, err
		}
		if len(s.Detectors) > 0 {
			c = &answer{Call: c, fix: func(r json.RawMessage) json.RawMessage { return g.checkResult(s, ts, r, name, rec) }}
		}
		if s.Hook != nil && s.Hook.Result {
			h := s.Hook
			c = newHooked(c, func(ctx context.Context, r json.RawMessage) (json.RawMessage, string) {
				return g.hookResult(ctx, h, r, name)
			}, hookNote)
		}
		return c, nil
	}
	return send(ctx, req)
}

// initialized applies the pins to the server's instructions.
func (g *Gate) initialized(res *jsonrpc.Message) *jsonrpc.Message {
	s := g.set.Load()
	if s.Pinning == guard.Off || res == nil || len(res.Result) == 0 {
		return res
	}
	instr, has := jsonrpc.StringMember(res.Result, "instructions")
	var ip *string
	if has {
		ip = &instr
	}
	g.mu.Lock()
	g.instr = ip
	g.mu.Unlock()
	st := guard.Compare(nil, ip, guard.ServerPins{Instructions: s.Pins.Instructions})
	if st.Instructions == guard.Approved || st.Instructions == "" || !has {
		return res
	}
	g.report(s, "instructions", string(st.Instructions), guard.InstructionsDigest(instr), st.InstructionsDiff, "initialize")
	if s.Pinning != guard.Block {
		return res
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(res.Result, &obj) != nil {
		return res
	}
	delete(obj, "instructions")
	out := *res
	out.Result = jsonrpc.Marshal(obj)
	return &out
}

// list applies the pins and the description checks to one tools/list
// result (nil: left as it is): it records the listed definitions (first:
// the first page, which starts a new listing), reports what is not
// approved or is flagged and, in block mode, drops it (strip: removes
// what was flagged).
func (g *Gate) list(s *Settings, result json.RawMessage, first bool) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(result, &obj) != nil {
		return nil
	}
	var tools []json.RawMessage
	if json.Unmarshal(obj["tools"], &tools) != nil {
		return nil
	}
	defs := make([]guard.Definition, 0, len(tools))
	for _, t := range tools {
		if s.Pinning == guard.Off {
			if name, ok := jsonrpc.StringMember(t, "name"); ok {
				defs = append(defs, guard.Definition{Name: name})
			}
			continue
		}
		d, err := guard.Define(t)
		if err != nil {
			g.opts.Logger.Warn("guard: a listed tool has no valid definition; left out", "destination", g.Name(), "err", err)
			continue
		}
		defs = append(defs, d)
	}
	var cmp guard.Comparison
	if s.Pinning != guard.Off {
		cmp = guard.Compare(defs, nil, guard.ServerPins{Tools: s.Pins.Tools})
	}
	kept := make([]json.RawMessage, 0, len(tools))
	flagged := map[string]string{}
	changed := false
	for _, t := range tools {
		name, _ := jsonrpc.StringMember(t, "name")
		if s.Pinning != guard.Off {
			if st := cmp.State(name); st.Status != guard.Approved {
				if st.Status != "" { // "": no valid definition (logged)
					g.report(s, name, string(st.Status), st.Digest, st.Diff, "tools/list")
				}
				if s.Pinning == guard.Block {
					changed = true
					continue
				}
			}
		}
		if s.checksDescriptions() {
			if out, why := g.checkDefinition(s, name, t); why != "" {
				flagged[name] = why
				changed = true
				continue
			} else if out != nil {
				t = out
				changed = true
			}
		}
		kept = append(kept, t)
	}
	g.mu.Lock()
	if first || g.listed == nil {
		g.listed = map[string]guard.Definition{}
		g.flagged = map[string]string{}
	}
	for _, d := range defs {
		g.listed[d.Name] = d
		delete(g.flagged, d.Name)
	}
	maps.Copy(g.flagged, flagged)
	g.mu.Unlock()
	if !changed {
		return nil
	}
	obj["tools"] = jsonrpc.Marshal(kept)
	return jsonrpc.Marshal(obj)
}

// checkDefinition runs the description detectors over every string of a
// listed tool t: monitor reports, strip returns the tool without what
// they found, block returns why the tool is refused. Both zero: nothing
// found, or nothing to change.
func (g *Gate) checkDefinition(s *Settings, name string, t json.RawMessage) (json.RawMessage, string) {
	rep, err := guard.Walk(t, s.maxBytes(), s.DescriptionDetectors...)
	if err != nil || len(rep.Findings) == 0 {
		return nil, ""
	}
	what := describe(rep.Findings, s.Descriptions, "definition")
	if g.fresh("definition\x00"+name, "definition "+what) {
		g.count(rep.Findings, s.Descriptions)
		g.opts.Logger.Warn("guard: a listed tool's definition holds hidden characters or markup", "destination", g.Name(),
			"tool", name, "found", what)
		g.audit(audit.Record{MCPMethod: "tools/list", Tool: name, Guard: what})
	}
	switch s.Descriptions {
	case guard.Block:
		f := rep.Findings[0]
		return nil, fmt.Sprintf("tool %q of %s is refused by switchboard guards: %s/%s in its definition at %s", name, g.Name(), f.Detector, f.Rule, f.Path)
	case guard.Strip:
		out, err := guard.Rewrite(t, rep.Findings, func(guard.Finding) string { return "" })
		if err != nil {
			return nil, ""
		}
		return out, ""
	}
	return nil, ""
}

// ChecksShadowing reports whether this destination's tools are to be
// checked against the other servers' of an aggregated catalog.
func (g *Gate) ChecksShadowing() bool { return g.set.Load().Shadowing != guard.Off }

// Shadowed is given what guard.CheckCatalog found against this
// destination's tools in an aggregated catalog (view names it, for the
// record) and returns the tools to leave out of that catalog: those
// found, in block mode; none otherwise. Each finding is audited (and
// counted) once per view.
func (g *Gate) Shadowed(view string, fs []guard.Shadowing) []string {
	s := g.set.Load()
	if s.Shadowing == guard.Off {
		return nil
	}
	var hide []string
	for _, f := range fs {
		what := fmt.Sprintf("shadowing/%s: %s's tool %q", f.Rule, f.Other, f.Named)
		if f.Rule == "collision" {
			what = fmt.Sprintf("shadowing/collision: %s lists %q too", f.Other, f.Named)
		}
		what += " in " + view + " (" + string(s.Shadowing) + ")"
		if g.fresh("shadowing\x00"+f.Tool+"\x00"+what, what) {
			g.detected("shadowing/"+f.Rule, s.Shadowing)
			g.opts.Logger.Warn("guard: a tool shadows another server's", "destination", g.Name(), "tool", f.Tool,
				"rule", f.Rule, "other", f.Other, "named", f.Named, "view", view, "mode", string(s.Shadowing))
			g.audit(audit.Record{MCPMethod: "tools/list", Tool: f.Tool, Guard: what})
		}
		if s.Shadowing == guard.Block && !slices.Contains(hide, f.Tool) {
			hide = append(hide, f.Tool)
		}
	}
	return hide
}

// report writes one audit record for a tool (or "instructions") whose
// standing is not approved, once per standing and digest.
func (g *Gate) report(s *Settings, tool, status, digest, diff, method string) {
	if !g.fresh(tool, status+" "+digest) {
		return
	}
	g.detected("pin/"+status, s.Pinning)
	g.opts.Logger.Warn("guard: tool definition not approved", "destination", g.Name(), "tool", tool, "status", status, "mode", string(s.Pinning))
	g.audit(audit.Record{MCPMethod: method, Tool: tool, Guard: fmt.Sprintf("pin %s (%s)", status, s.Pinning), Diff: diff})
}

// fresh records what was audited under key (a tool, or a check's key)
// and reports whether it differs from what was last: each is audited
// once.
func (g *Gate) fresh(key, what string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reported[key] == what {
		return false
	}
	g.reported[key] = what
	return true
}

// audit writes a record of the gate's own (nil Options.Audit: none).
func (g *Gate) audit(r audit.Record) {
	if g.opts.Audit != nil {
		r.Time, r.Destination = time.Now(), g.Name()
		g.opts.Audit(&r)
	}
}

// refused returns why a call of tool name is refused ("": it is not): in
// block mode, not listed-and-approved, or its definition flagged. A name
// the gate has not seen listed is listed first (every page), through
// send, with the _meta of req (the call).
func (g *Gate) refused(ctx context.Context, s *Settings, name string, send sendFunc, req *jsonrpc.Message) (string, error) {
	g.mu.Lock()
	d, ok := g.listed[name]
	g.mu.Unlock()
	if !ok {
		if err := g.fetch(ctx, s, send, jsonrpc.Member(req.Params, "_meta")); err != nil {
			return "", err
		}
		g.mu.Lock()
		d, ok = g.listed[name]
		g.mu.Unlock()
	}
	if s.Pinning == guard.Block {
		if p, pinned := s.Pins.Tools[name]; !ok || !pinned || p.Digest != d.Digest {
			return fmt.Sprintf("tool %q of %s is not approved: its definition changed or is new (switchboard pin --approve)", name, g.Name()), nil
		}
	}
	if s.Descriptions == guard.Block {
		g.mu.Lock()
		why := g.flagged[name]
		g.mu.Unlock()
		return why, nil
	}
	return "", nil
}

// fetch lists the server's tools (all pages) through the gate's list
// check, to learn their definitions.
func (g *Gate) fetch(ctx context.Context, s *Settings, send sendFunc, meta json.RawMessage) error {
	return session.ListPages(ctx, send, "tools/list", "switchboard-guard-", meta, func(i int, res json.RawMessage) error {
		g.list(s, res, i == 0)
		return nil
	})
}

// answer is a call whose response's result is rewritten by fix (nil:
// left as it is).
type answer struct {
	session.Call
	fix func(json.RawMessage) json.RawMessage
}

func (c *answer) Poll() (*jsonrpc.Message, bool) {
	m, ended := c.Call.Poll()
	if m != nil && m.IsResponse() && len(m.Result) > 0 {
		if r := c.fix(m.Result); r != nil {
			out := *m
			out.Result = r
			return &out, ended
		}
	}
	return m, ended
}

func (c *answer) UpstreamTime() time.Duration { return session.UpstreamTime(c.Call) }

func (s *Settings) maxBytes() int {
	if s.MaxBytes <= 0 {
		return 1 << 20
	}
	return s.MaxBytes
}

// checksDescriptions reports whether listed tools are checked.
func (s *Settings) checksDescriptions() bool {
	return s.Descriptions != guard.Off && len(s.DescriptionDetectors) > 0
}

// action is what a detection on tool's calls does.
func (s *Settings) action(ts ToolSettings) guard.Mode {
	if ts.Action != guard.Off {
		return ts.Action
	}
	return s.Action
}

// allowed drops the findings the tool's scope lets through.
func allowed(fs []guard.Finding, ts ToolSettings) []guard.Finding {
	if len(ts.Allow) == 0 {
		return fs
	}
	return slices.DeleteFunc(fs, func(f guard.Finding) bool {
		return slices.Contains(ts.Allow, f.Rule) || slices.Contains(ts.Allow, f.Detector)
	})
}

// detected counts one detection.
func (g *Gate) detected(rule string, action guard.Mode) {
	if g.opts.Detected != nil {
		g.opts.Detected(rule, actionName(action))
	}
}

// count counts each finding.
func (g *Gate) count(fs []guard.Finding, action guard.Mode) {
	for _, f := range fs {
		g.detected(f.Detector+"/"+f.Rule, action)
	}
}

func (s *Settings) detectors() []guard.Detector {
	out := make([]guard.Detector, len(s.Detectors))
	for i, d := range s.Detectors {
		out[i] = d.Detector
	}
	return out
}

// replacement is what redact puts in a finding's place: a typed
// placeholder for secrets and personal data, nothing for hidden
// characters and markup.
func replacement(f guard.Finding) string {
	if f.Detector == "hidden" || f.Detector == "markup" {
		return ""
	}
	return guard.Placeholder(f)
}

// describe lists findings for an audit record: detector/rule at
// path+offset, never the text.
func describe(fs []guard.Finding, action guard.Mode, where string) string {
	var b strings.Builder
	for i, f := range fs {
		if i == 10 {
			fmt.Fprintf(&b, "; … %d more", len(fs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s/%s at %s%s+%d", f.Detector, f.Rule, where, f.Path, f.Offset)
	}
	fmt.Fprintf(&b, " (%s)", actionName(action))
	return b.String()
}

func actionName(a guard.Mode) string {
	if a == guard.Off {
		return string(guard.Monitor)
	}
	return string(a)
}

// note adds what the detectors found (hook: the hook's verdict) to the
// request's audit record, or writes a record of the gate's own when there
// is none.
func (g *Gate) note(rec *audit.Record, tool, what string, hook bool) {
	if what == "" {
		return
	}
	if rec == nil {
		r := audit.Record{MCPMethod: "tools/call", Tool: tool, Guard: what}
		if hook {
			r.Guard, r.Hook = "", what
		}
		g.audit(r)
		return
	}
	field := &rec.Guard
	if hook {
		field = &rec.Hook
	}
	if *field != "" {
		*field += "; "
	}
	*field += what
}

// refuse answers req with an InvalidParams error.
func refuse(req *jsonrpc.Message, format string, args ...any) session.Call {
	return session.NewAnswer(jsonrpc.NewError(req.ID, jsonrpc.Errorf(jsonrpc.InvalidParams, format, args...)))
}

// withArguments returns req with its arguments (params[start:end]) less
// the spans of fs, as Rewrite replaces them; req itself when they are not
// JSON.
func withArguments(req *jsonrpc.Message, args json.RawMessage, start, end int, fs []guard.Finding, repl func(guard.Finding) string) *jsonrpc.Message {
	out, err := guard.Rewrite(args, fs, repl)
	if err != nil {
		return req
	}
	r := *req
	r.Params = jsonrpc.Splice(req.Params, start, end, out)
	return &r
}

// withheld is the error result that replaces a result refused by a guard.
func withheld(format string, args ...any) json.RawMessage {
	return jsonrpc.Marshal(map[string]any{"isError": true, "content": []map[string]string{{"type": "text", "text": fmt.Sprintf(format, args...)}}})
}

// scan runs the detectors over doc (a call's arguments or result, as
// where names it) less what the tool's scope allows, counts and notes
// what they found, and returns it with the action to take (guard.Off:
// nothing found, or monitor).
func (g *Gate) scan(s *Settings, ts ToolSettings, doc json.RawMessage, tool, where string, rec *audit.Record) ([]guard.Finding, guard.Mode) {
	rep, err := guard.Walk(doc, s.maxBytes(), s.detectors()...)
	if err != nil {
		return nil, guard.Off
	}
	fs := allowed(rep.Findings, ts)
	if len(fs) == 0 {
		return nil, guard.Off
	}
	action := s.action(ts)
	g.count(fs, action)
	g.note(rec, tool, describe(fs, action, where), false)
	return fs, action
}

// checkArguments runs the detectors over a call's arguments: monitor
// notes them, redact rewrites them, block refuses the call.
func (g *Gate) checkArguments(s *Settings, ts ToolSettings, req *jsonrpc.Message, tool string, rec *audit.Record) (*jsonrpc.Message, session.Call) {
	args, start, end, ok := jsonrpc.Lookup(req.Params, "arguments")
	if !ok {
		return req, nil
	}
	switch fs, action := g.scan(s, ts, args, tool, "arguments", rec); action {
	case guard.Block:
		f := fs[0]
		return nil, refuse(req, "tools/call %q refused by switchboard guards: %s/%s in arguments%s", tool, f.Detector, f.Rule, f.Path)
	case guard.Redact:
		return withArguments(req, args, start, end, fs, replacement), nil
	}
	return req, nil
}

// checkResult runs the detectors over a call's result: monitor notes
// them, redact rewrites the result, block replaces it with an error
// result naming the rule.
func (g *Gate) checkResult(s *Settings, ts ToolSettings, result json.RawMessage, tool string, rec *audit.Record) json.RawMessage {
	switch fs, action := g.scan(s, ts, result, tool, "result", rec); action {
	case guard.Block:
		f := fs[0]
		return withheld("The result of %s was withheld by Switchboard's guards: %s/%s at %s.", tool, f.Detector, f.Rule, f.Path)
	case guard.Redact:
		out, err := guard.Rewrite(result, fs, replacement)
		if err != nil {
			return nil
		}
		return out
	}
	return nil
}
