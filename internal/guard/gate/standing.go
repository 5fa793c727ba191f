package gate

import (
	"maps"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/guard"
)

// Standing is a destination's listing as the gate last saw it pass,
// against the pins in force: what /ui shows and approves.
type Standing struct {
	// Comparison is guard.Compare's: each tool's status and diff (the
	// diff `switchboard pin` prints).
	guard.Comparison
	// Listed is false before the first tools/list passed the gate (the
	// Comparison then only has the pinned tools, as removed).
	Listed bool
	// Definitions are the listed tools' definitions, by name: what an
	// approval records.
	Definitions []guard.Definition
	// Instructions are the server's instructions as last seen (nil: none,
	// or no session initialized yet).
	Instructions *string
}

// Standing returns the destination's standing.
func (g *Gate) Standing() Standing {
	s := g.set.Load()
	g.mu.Lock()
	st := Standing{Listed: g.listed != nil, Instructions: g.instr, Definitions: slices.Collect(maps.Values(g.listed))}
	g.mu.Unlock()
	slices.SortFunc(st.Definitions, func(a, b guard.Definition) int { return strings.Compare(a.Name, b.Name) })
	st.Comparison = guard.Compare(st.Definitions, st.Instructions, s.Pins)
	return st
}
