package guard

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKeywordSet: the automaton finds every occurrence of every keyword,
// overlapping ones and any case of ASCII letters included, as a search of
// the lowered text for each keyword does; over the secret rules' own
// keywords and random texts made of their letters.
func TestKeywordSet(t *testing.T) {
	check := func(keywords []string, text string) {
		t.Helper()
		type hit struct{ start, k int }
		var got, want []hit
		newKeywordSet(keywords).each(text, func(start, k int) { got = append(got, hit{start, k}) })
		lower := strings.ToLower(text)
		for k, kw := range keywords {
			for i := 0; i+len(kw) <= len(lower); i++ {
				if lower[i:i+len(kw)] == kw {
					want = append(want, hit{i, k})
				}
			}
		}
		order := func(a, b hit) int {
			if a.start != b.start {
				return a.start - b.start
			}
			return a.k - b.k
		}
		slices.SortFunc(got, order)
		slices.SortFunc(want, order)
		if !slices.Equal(got, want) {
			t.Fatalf("keywords %q in %q:\n got %v\nwant %v", keywords, text, got, want)
		}
	}
	check([]string{"he", "she", "his", "hers"}, "uSHErs ahishers")
	check([]string{"a", "aa", "aaa"}, "AaAaA")
	check([]string{"s.", "hvs.", "key"}, "checks. hvs.x KEY keys.")
	kw := defaultSecrets(t).keywords
	letters := strings.Join(kw, "")
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		b := make([]byte, 2000)
		for i := range b {
			c := letters[rng.IntN(len(letters))]
			if rng.IntN(3) == 0 {
				c = strings.ToUpper(string(c))[0]
			}
			b[i] = c
		}
		// Plant whole keywords too: random letters seldom spell long ones.
		for range 50 {
			k := kw[rng.IntN(len(kw))]
			copy(b[rng.IntN(len(b)-len(k)):], k)
		}
		check(kw, string(b))
	}
}

// TestNeedRun: what needRun derives holds of every match: of
// hand-written expressions (with the run expected), and of the samples
// generated from each secret rule (no rule may lose a match to it).
func TestNeedRun(t *testing.T) {
	for _, c := range []struct {
		re   string
		k    int
		in   string
		miss string
	}{
		{`\b(s\.[a-z0-9]{24})\b`, 26, "s.abcdefghijklmnopqrstuvwx", "checks. The deployment of"},
		{`(?i)(?:key|api)[\w.-]{0,20}[=:]\s*([a-z0-9]{32})`, 32, "key=0123456789abcdef0123456789abcdef", "key = value of the day"},
		{`ghp_[0-9a-zA-Z]{36}|github_pat_\w{82}`, 40, "ghp_" + strings.Repeat("a", 36), "ghp_short"},
		{`(?i)\b(AKIA[A-Z0-9]{16})`, 20, "akia" + strings.Repeat("B", 16), "AKIA short"},
		{`a+b*`, 1, "a", ""},
	} {
		r := needRun(regexp.MustCompile(c.re))
		if r.k != c.k {
			t.Errorf("%s: run of %d, want %d", c.re, r.k, c.k)
		}
		if !r.in(c.in) {
			t.Errorf("%s: %q does not meet its run", c.re, c.in)
		}
		if c.miss != "" && r.in(c.miss) {
			t.Errorf("%s: %q meets its run", c.re, c.miss)
		}
	}
	s := defaultSecrets(t)
	rng := rand.New(rand.NewPCG(3, 3))
	checked := 0
	for _, r := range s.rules {
		for range 3 {
			sample := genSecret(rng, r.re)
			for _, m := range r.re.FindAllStringIndex(sample, -1) {
				checked++
				if !r.run.in(sample[m[0]:m[1]]) {
					t.Errorf("rule %s: match %q lacks its run (%d)", r.id, sample[m[0]:m[1]], r.run.k)
				}
			}
		}
	}
	if checked < len(s.rules) {
		t.Errorf("only %d matches checked over %d rules", checked, len(s.rules))
	}
}
