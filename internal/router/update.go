package router

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
	"github.com/switchboard-mcp/switchboard/internal/mcp"
)

// errRemoved is why a member that Update took out of a session is
// unavailable: calls in flight to it are answered with it.
var errRemoved = errors.New("removed from the view by a configuration reload")

// Update replaces the view the router serves (a configuration reload). It
// is safe while sessions are live and calls are in flight, and returns
// once every live session follows v:
//
//   - new sessions join the servers of v;
//   - each live session joins, concurrently and with the client's original
//     initialize, the servers of v it lacks: a name it has no member for,
//     or a name whose Server is a different object (a changed destination).
//     A server that fails to join is logged and left out, as at Join;
//   - it leaves the members whose server is no longer in v, or was
//     replaced: calls in flight to them are answered with an error naming
//     the server, as when a server ends;
//   - its tool_prefix policy and tool filters become those of v;
//   - its lists are dropped and its client gets, on its listen stream,
//     notifications/tools/list_changed (whenever anything changed),
//     .../prompts/list_changed and .../resources/list_changed (when a
//     server offering them came or went, or the order or the prefix policy
//     changed): each at most once per Update;
//   - a session whose view is unchanged (the same Server objects in the
//     same order, the same policy and filters) is not touched: it gets no
//     notification and its calls go on;
//   - a session whose every server is gone or failed ends, as when its
//     last server ends (unless v has no server at all).
//
// Open 2026-07-28 subscriptions/listen streams follow v too (see
// listenCall.update). Update after Close does nothing.
func (r *Router) Update(v *View) {
	if v == nil {
		v = &View{}
	}
	r.updating.Lock()
	defer r.updating.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	old := r.view.Load()
	r.view.Store(v)
	changed := !sameView(old, v)
	if changed {
		r.stateless.Store(r.newStatelessCatalog(v))
	}
	cat := r.stateless.Load()
	sessions := slices.Collect(maps.Keys(r.sessions))
	var listens []*listenCall
	if changed {
		listens = slices.Collect(maps.Keys(r.listens))
	}
	r.mu.Unlock()

	if changed {
		r.log.Info("view updated", "view", v.Name, "servers", namesOf(v.Servers), "tool_prefix", v.Prefix, "sessions", len(sessions))
	}
	var wg sync.WaitGroup
	for _, a := range sessions {
		wg.Go(func() { a.update(context.Background(), v, true) })
	}
	if len(listens) > 0 {
		// The stateless catalog lists afresh for every request and knows
		// no capabilities: every kind may have changed with the servers.
		ks := viewKinds(old, v, statelessServers(old), statelessServers(v))
		for _, c := range listens {
			wg.Go(func() { c.update(cat, ks) })
		}
	}
	wg.Wait()
}

// Close ends every live session of the router (their downstreams are
// ended and their members left) and every open subscriptions/listen
// stream (with its final result); later joins fail. For a view that
// disappears on reload.
func (r *Router) Close() {
	r.updating.Lock()
	defer r.updating.Unlock()
	r.mu.Lock()
	r.closed = true
	sessions := slices.Collect(maps.Keys(r.sessions))
	listens := slices.Collect(maps.Keys(r.listens))
	r.mu.Unlock()
	r.closeRunner()
	var wg sync.WaitGroup
	for _, a := range sessions {
		wg.Go(func() {
			a.down.End(errViewClosed)
			a.Leave() // the session leaves too (idempotent); not all downstreams do
		})
	}
	for _, c := range listens {
		wg.Go(func() { c.end(true, true) })
	}
	wg.Wait()
	if len(sessions)+len(listens) > 0 {
		r.log.Info("view closed; its sessions ended", "view", r.Name(), "sessions", len(sessions), "streams", len(listens))
	}
}

// update moves the session to view v (see Router.Update). With notify
// false (a session not yet answered) the client is told nothing and the
// session is never ended here.
func (a *aggregate) update(ctx context.Context, v *View, notify bool) {
	a.updating.Lock()
	defer a.updating.Unlock()
	a.cat.mu.Lock()
	old, cur := a.cat.view, a.cat.members
	if sameView(old, v) {
		a.cat.view = v
		a.cat.mu.Unlock()
		return
	}
	a.cat.mu.Unlock()

	// Which members stay (same name, same Server object), which servers
	// are joined.
	byName := map[string]*member{}
	for _, m := range cur {
		if _, ok := byName[m.name]; !ok {
			byName[m.name] = m
		}
	}
	var next []*member // in the order of v; nil where a server is joined
	var add []Server
	kept := map[*member]bool{}
	seen := map[string]bool{}
	for _, s := range v.Servers {
		n := s.Name()
		if seen[n] {
			continue // a name twice: the first one serves
		}
		seen[n] = true
		if m := byName[n]; m != nil && sameServer(m.srv, s) {
			kept[m] = true
			next = append(next, m)
			continue
		}
		add = append(add, s)
		next = append(next, nil)
	}
	notKept := func(m *member) bool { return !kept[m] }
	removed := slices.DeleteFunc(slices.Clone(cur), func(m *member) bool { return kept[m] })

	joined := a.join(ctx, add)
	j := 0
	for i, m := range next {
		if m == nil {
			next[i] = joined[j]
			j++
		}
	}
	changedMembers := slices.Concat(joined, removed)
	keptOld := slices.DeleteFunc(slices.Clone(cur), notKept)
	keptNew := slices.DeleteFunc(slices.Clone(next), notKept)
	var reordered []*member
	if !slices.Equal(keptOld, keptNew) {
		reordered = keptNew
	}
	ks := viewKinds(old, v, nil, nil)
	mergeKinds(&ks, memberKinds(changedMembers, len(add)+len(removed) > 0))
	mergeKinds(&ks, memberKinds(reordered, len(reordered) > 0))

	a.cat.mu.Lock()
	a.mu.Lock()
	left := a.left
	a.mu.Unlock()
	if left {
		// The session ended meanwhile: Leave saw the old members only.
		a.cat.mu.Unlock()
		leaveAll(joined)
		return
	}
	a.cat.members, a.cat.view = next, v
	var failCalls []*routedCall
	gone := map[*member]bool{}
	for _, m := range removed {
		gone[m] = true
		if m.err == nil {
			m.err = errRemoved
		}
		for k := range nKinds {
			m.lists[k], m.have[k] = nil, false
			m.gen[k]++
		}
		failCalls = slices.AppendSeq(failCalls, maps.Keys(m.inflight))
		m.inflight = nil
	}
	for k, ch := range ks {
		if ch {
			a.cat.merged[k] = nil
			a.cat.listGen[k]++
		}
	}
	alive, failed := serving(next)
	a.cat.mu.Unlock()

	// Server→client requests of the members removed are dropped (the
	// client's answer would have nowhere to go).
	a.mu.Lock()
	maps.DeleteFunc(a.reverse, func(_ int64, e reverseEntry) bool { return gone[e.m] })
	a.mu.Unlock()
	for _, rc := range failCalls {
		rc.fail(unavailable(rc.m.name, errRemoved))
	}
	leaveAll(removed)

	r := a.r
	r.log.Debug("session follows the new view", "view", v.Name,
		"joined", memberNames(joined), "left", memberNames(removed), "tools", ks[kTools], "prompts", ks[kPrompts], "resources", ks[kResources])
	if !notify {
		return
	}
	if len(next) > 0 && alive == 0 {
		err := jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "every server of %s is unavailable after a configuration reload: %s", r.viewLabel(), strings.Join(failed, "; "))
		r.log.Warn("session ended: no server of the view is left", "view", v.Name, "err", err)
		a.down.End(err)
		return
	}
	for _, k := range []kind{kTools, kPrompts, kResources} {
		if ks[k] {
			a.down.Deliver(jsonrpc.NewNotification(kinds[k].changed, nil))
		}
	}
}

// leaveAll leaves the backends of members, concurrently, and waits.
func leaveAll(ms []*member) {
	var wg sync.WaitGroup
	for _, m := range ms {
		if b := m.backend; b != nil {
			wg.Go(b.Leave)
		}
	}
	wg.Wait()
}

// viewKinds returns the lists that a change from view old to v may change
// by itself: tools and prompts with the prefix policy, tools with the
// filters, and every list when the servers (oldS and newS, for the
// stateless catalog; nil otherwise) differ.
func viewKinds(old, v *View, oldS, newS []Server) [nKinds]bool {
	var ks [nKinds]bool
	if prefixPolicy(old.Prefix) != prefixPolicy(v.Prefix) {
		ks[kTools], ks[kPrompts] = true, true
	}
	if !sameFilters(old, v) {
		ks[kTools] = true
	}
	if !sameShape(old, v) {
		ks[kTools], ks[kPrompts] = true, true
	}
	if !sameServers(oldS, newS) {
		for k := range nKinds {
			ks[k] = true
		}
	}
	return ks
}

// memberKinds returns the lists that members coming, going or moving may
// change (when changed): tools always, prompts and resources when one of
// them offers them.
func memberKinds(ms []*member, changed bool) [nKinds]bool {
	var ks [nKinds]bool
	if !changed {
		return ks
	}
	ks[kTools] = true
	for _, m := range ms {
		if m.caps == nil {
			continue // failed to join: it showed nothing
		}
		if m.has("prompts") {
			ks[kPrompts] = true
		}
		if m.has("resources") {
			ks[kResources], ks[kTemplates] = true, true
		}
	}
	return ks
}

func mergeKinds(dst *[nKinds]bool, src [nKinds]bool) {
	for k, ch := range src {
		dst[k] = dst[k] || ch
	}
}

// sameView reports whether a session of view a would see exactly what one
// of view b sees: the same Server objects in the same order, the same
// prefix policy and the same filters.
func sameView(a, b *View) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return sameServers(a.Servers, b.Servers) && prefixPolicy(a.Prefix) == prefixPolicy(b.Prefix) && sameFilters(a, b) && sameShape(a, b)
}

func sameServers(a, b []Server) bool {
	return slices.EqualFunc(a, b, func(x, y Server) bool { return sameServer(x, y) && x.Name() == y.Name() })
}

// sameServer reports whether a and b are the same Server object (pointer
// identity for the gateway's destinations). Servers of a type that cannot
// be compared are never the same.
func sameServer(a, b Server) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	return a == b
}

func prefixPolicy(p string) string {
	if p == "" {
		return PrefixAlways
	}
	return p
}

func sameFilters(a, b *View) bool {
	if !slices.Equal(a.Allow, b.Allow) || !slices.Equal(a.Deny, b.Deny) {
		return false
	}
	same := func(x, y map[string][]Filter) bool {
		for s, fs := range x {
			if !slices.EqualFunc(fs, y[s], func(f, g Filter) bool {
				return slices.Equal(f.Allow, g.Allow) && slices.Equal(f.Deny, g.Deny)
			}) {
				return false
			}
		}
		return true
	}
	return same(a.Filters, b.Filters) && same(b.Filters, a.Filters)
}

// statelessServers returns the servers of v that serve 2026-07-28.
func statelessServers(v *View) []Server {
	var out []Server
	for _, s := range v.Servers {
		if _, ok := s.(StatelessServer); ok {
			out = append(out, s)
		}
	}
	return out
}

func namesOf(servers []Server) []string {
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.Name())
	}
	return out
}

func memberNames(ms []*member) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.name)
	}
	return out
}
