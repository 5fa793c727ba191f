package router

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	long := strings.Repeat("x", 70)
	cases := []struct {
		in   string
		same bool
	}{
		{"echo", true},
		{"a-b_C9", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"has.dot", false},
		{"sp ace", false},
		{"ünï", false},
		{long, false},
	}
	for _, c := range cases {
		got := Normalize(c.in)
		if !ValidName(got) {
			t.Errorf("Normalize(%q) = %q: not a valid name", c.in, got)
		}
		if (got == c.in) != c.same {
			t.Errorf("Normalize(%q) = %q; unchanged = %v, want %v", c.in, got, got == c.in, c.same)
		}
		if Normalize(c.in) != got {
			t.Errorf("Normalize(%q) is not deterministic", c.in)
		}
	}
	// Shortened names keep a readable head and stay distinct.
	a, b := Normalize(long+"a"), Normalize(long+"b")
	if a == b {
		t.Errorf("distinct long names shortened to the same %q", a)
	}
	if len(a) != MaxNameLen || !strings.HasPrefix(a, strings.Repeat("x", 50)) {
		t.Errorf("shortened %q: want 64 characters starting with the original head", a)
	}
	// Sanitised names do not collide with names that really have '_'.
	if Normalize("a.b") == "a_b" {
		t.Error(`Normalize("a.b") collides with "a_b"`)
	}
}

func TestPrefixedLong(t *testing.T) {
	server := strings.Repeat("s", 40)
	tool := strings.Repeat("t", 40)
	got := Prefixed(server, tool)
	if len(got) != MaxNameLen || !ValidName(got) {
		t.Fatalf("Prefixed = %q (%d chars)", got, len(got))
	}
	if !strings.HasPrefix(got, server+Separator) {
		t.Errorf("Prefixed = %q: the server prefix should stay readable", got)
	}
	if !hasPrefix(got, server) {
		t.Errorf("hasPrefix(%q, %q) = false", got, server)
	}
	// A server name so long that the cut falls inside its prefix.
	server = strings.Repeat("s", 64)
	got = Prefixed(server, "x")
	if !hasPrefix(got, server) || hasPrefix(got, "other") {
		t.Errorf("hasPrefix misjudges %q", got)
	}
}

func items(pairs ...string) []Item {
	var out []Item
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Item{Server: pairs[i], Name: pairs[i+1]})
	}
	return out
}

func TestExposeNamesAlways(t *testing.T) {
	for _, policy := range []string{"", PrefixAlways} {
		got, err := ExposeNames(policy, items("a", "echo", "b", "echo", "b", "add"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"a__echo", "b__echo", "b__add"}
		if !slices.Equal(got, want) {
			t.Errorf("policy %q: got %v, want %v", policy, got, want)
		}
	}
}

func TestExposeNamesConflict(t *testing.T) {
	got, err := ExposeNames(PrefixConflict, items("a", "echo", "b", "echo", "b", "add", "a", "x.y"))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != "a__echo" || got[1] != "b__echo" || got[2] != "add" || !ValidName(got[3]) || got[3] == "x.y" {
		t.Errorf("got %v", got)
	}
	// A kept name equal to another's prefixed name is prefixed too.
	got, err = ExposeNames(PrefixConflict, items("a", "b__c", "b", "c", "d", "c"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a__b__c", "b__c", "d__c"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// A server listing a name twice: the repeat is dropped, no prefix.
	got, _ = ExposeNames(PrefixConflict, items("a", "x", "a", "x"))
	if !slices.Equal(got, []string{"x", ""}) {
		t.Errorf("duplicate within one server: got %v", got)
	}
}

func TestExposeNamesNever(t *testing.T) {
	got, err := ExposeNames(PrefixNever, items("a", "echo", "b", "add"))
	if err != nil || !slices.Equal(got, []string{"echo", "add"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	_, err = ExposeNames(PrefixNever, items("alpha", "echo", "beta", "add", "gamma", "echo"))
	var ce *CollisionError
	if !errors.As(err, &ce) {
		t.Fatalf("want a CollisionError, got %v", err)
	}
	if ce.Name != "echo" || ce.Server1 != "alpha" || ce.Server2 != "gamma" {
		t.Errorf("collision %+v", ce)
	}
	for _, s := range []string{"alpha", "gamma", "echo"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
}

func TestFilter(t *testing.T) {
	cases := []struct {
		f      Filter
		server string
		name   string
		want   bool
	}{
		{Filter{}, "gh", "delete_repo", true},
		{Filter{Deny: []string{"*delete*"}}, "gh", "delete_repo", false},
		{Filter{Deny: []string{"*delete*"}}, "gh", "create_repo", true},
		{Filter{Allow: []string{"gh__*"}}, "gh", "create_repo", true}, // the prefixed form
		{Filter{Allow: []string{"gh__*"}}, "fs", "read", false},       //
		{Filter{Allow: []string{"read*"}}, "fs", "read_file", true},   // the bare form
		{Filter{Allow: []string{"*"}, Deny: []string{"fs__read_file"}}, "fs", "read_file", false},
		{Filter{Allow: []string{"x"}, Deny: []string{"x"}}, "s", "x", false},
	}
	for _, c := range cases {
		if got := admitted([]Filter{c.f}, c.server, c.name); got != c.want {
			t.Errorf("filter %+v, %s/%s: got %v, want %v", c.f, c.server, c.name, got, c.want)
		}
	}
	// Several filters (a server reached through several namespaces): any admits.
	fs := []Filter{{Deny: []string{"*"}}, {Allow: []string{"echo"}}}
	if !admitted(fs, "s", "echo") || admitted(fs, "s", "add") {
		t.Error("union of filters")
	}
	if !admitted(nil, "s", "anything") {
		t.Error("no filter admits everything")
	}
}
