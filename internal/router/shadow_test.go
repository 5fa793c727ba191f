package router

import (
	"slices"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/guard"
)

// shadowed is a fakeServer with guards on shadowing (as the guards' gate):
// it records what it is told and hides the tools found when block.
type shadowed struct {
	*fakeServer
	block bool
	mu    sync.Mutex
	told  []guard.Shadowing
}

func (s *shadowed) ChecksShadowing() bool { return true }

func (s *shadowed) Shadowed(view string, fs []guard.Shadowing) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.told = append(s.told, fs...)
	if !s.block {
		return nil
	}
	var hide []string
	for _, f := range fs {
		hide = append(hide, f.Tool)
	}
	return hide
}

// TestRouterShadowing: the catalog asks a server whose guards check
// shadowing about its tools that collide with another server's, and
// leaves out those it hides — from the list and from routing — while the
// other server's tool of that name stays, under its own name now that it
// collides with nothing; a server without guards is not asked.
func TestRouterShadowing(t *testing.T) {
	a := &shadowed{fakeServer: &fakeServer{name: "a", tools: []string{"echo", "add"}}, block: true}
	b := &fakeServer{name: "b", tools: []string{"echo", "b1"}}
	be, _, _ := join(t, &View{Servers: []Server{a, b}, Prefix: PrefixConflict}, Options{})
	names, _ := listAll(t, be)
	if want := []string{"add", "echo", "b1"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	if got := toolText(t, call(t, be, "tools/call", map[string]any{"name": "echo"})); got != "b:echo" {
		t.Errorf("echo routed to %q, want b's", got)
	}
	if e := call(t, be, "tools/call", map[string]any{"name": "a__echo"})[0].ErrorOf(); e == nil {
		t.Errorf("a's hidden echo is callable")
	}
	a.mu.Lock()
	told := slices.Clone(a.told)
	a.mu.Unlock()
	if len(told) == 0 || told[0] != (guard.Shadowing{Rule: "collision", Server: "a", Tool: "echo", Other: "b", Named: "echo"}) {
		t.Errorf("a was told %+v", told)
	}

	// Monitor: told, nothing hidden.
	m := &shadowed{fakeServer: &fakeServer{name: "a", tools: []string{"echo"}}}
	be, _, _ = join(t, &View{Servers: []Server{m, &fakeServer{name: "b", tools: []string{"echo"}}}, Prefix: PrefixConflict}, Options{})
	if names, _ := listAll(t, be); !slices.Equal(names, []string{"a__echo", "b__echo"}) {
		t.Errorf("monitor: tools = %v", names)
	}
}
