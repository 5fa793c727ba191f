package guard

import (
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// gitleaksRules is gitleaks' default rule set (config/gitleaks.toml of
// gitleaks v8.30.1, MIT, Copyright (c) 2019 Zachary Rice; see
// gitleaks/LICENSE), read as data.
//
//go:embed gitleaks/gitleaks.toml
var gitleaksRules []byte

// OffByDefault are the rules of the default set that Secrets leaves out
// unless named in Enable: generic-api-key matches most key = value pairs
// and costs most of the scan (see docs/guards.md).
var OffByDefault = []string{"generic-api-key"}

// credentialParams are query parameters that carry an AWS access key id
// as part of a presigned URL, made to be handed out: an access key id
// right after one is not a finding (gitleaks flags them; see
// docs/guards.md).
var credentialParams = []string{"x-amz-credential=", "x-amz-credential%3d", "awsaccesskeyid="}

// SecretsConfig chooses the rules. The zero value is gitleaks' default set
// less OffByDefault.
type SecretsConfig struct {
	Rules   []byte   // a gitleaks-format TOML rule set instead of the built-in one
	Enable  []string // rule ids of OffByDefault to turn on
	Disable []string // rule ids to leave out
}

// Secrets finds credentials with gitleaks' rules: a rule runs only where
// one of its keywords occurs (case-insensitively), its secret (the
// secretGroup, else the first non-empty group, else the match) must reach
// the rule's entropy, and the rule's and the global allowlists are
// honoured (path-only criteria never match: a string has no path).
// Findings' Rule is the gitleaks rule id; the span is the secret. Safe for
// concurrent use. The rules are gitleaks' own file, not its detect package,
// which would add megabytes to the binary (see docs/guards.md).
type Secrets struct {
	rules     []secretRule
	global    allowlist
	keywords  []string    // every rule keyword, lower case, deduplicated
	kwset     *keywordSet // over keywords: one pass finds every keyword present
	always    []int       // the rules without keywords (indices into rules)
	byKeyword [][]int     // keyword -> the rules it lets run
}

type secretRule struct {
	id          string
	re          *regexp.Regexp
	secretGroup int
	entropy     float64
	keywords    []int // into Secrets.keywords; none: the rule always runs
	allow       []allowlist
	maxLen      int // the most bytes a match spans; -1: unbounded (see windows)
	run         run // what every match holds (see needRun); k 0: nothing known
}

type allowlist struct {
	and       bool
	target    string // "secret" (""), "match", "line"
	regexes   []*regexp.Regexp
	stopwords []string
	hasPaths  bool
}

// tomlRules is the part of gitleaks' config format Secrets reads.
type tomlRules struct {
	Allowlist  tomlAllowlist `toml:"allowlist"`
	Allowlists []tomlAllowlist
	Rules      []struct {
		ID          string `toml:"id"`
		Regex       string `toml:"regex"`
		Path        string `toml:"path"`
		SecretGroup int    `toml:"secretGroup"`
		Entropy     float64
		Keywords    []string
		Allowlists  []tomlAllowlist
	} `toml:"rules"`
}

type tomlAllowlist struct {
	Condition   string
	RegexTarget string `toml:"regexTarget"`
	Regexes     []string
	Stopwords   []string
	Paths       []string
}

// NewSecrets compiles the rule set. An unreadable rule set or a rule
// whose regular expression Go's RE2 refuses is an error naming the rule;
// so is a name in Enable or Disable that no rule has.
func NewSecrets(cfg SecretsConfig) (*Secrets, error) {
	data := cfg.Rules
	if data == nil {
		data = gitleaksRules
	}
	var tr tomlRules
	if err := toml.Unmarshal(data, &tr); err != nil {
		return nil, fmt.Errorf("secret rules: %w", err)
	}
	s := &Secrets{}
	for i, a := range slices.Concat([]tomlAllowlist{tr.Allowlist}, tr.Allowlists) {
		g, err := compileAllowlist(a)
		if err != nil {
			return nil, fmt.Errorf("secret rules: global allowlist: %w", err)
		}
		if i == 0 {
			s.global = g // the [allowlist] table sets the condition and target
			continue
		}
		s.global.regexes = append(s.global.regexes, g.regexes...)
		s.global.stopwords = append(s.global.stopwords, g.stopwords...)
	}
	ids := map[string]bool{}
	for _, r := range tr.Rules {
		ids[r.ID] = true
	}
	for _, name := range slices.Concat(cfg.Enable, cfg.Disable) {
		if !ids[name] {
			return nil, fmt.Errorf("secret rules: no rule %q", name)
		}
	}
	kw := map[string]int{}
	for _, r := range tr.Rules {
		off := slices.Contains(OffByDefault, r.ID) && !slices.Contains(cfg.Enable, r.ID)
		if r.Regex == "" || r.Path != "" || off || slices.Contains(cfg.Disable, r.ID) {
			continue // path rules match file names, which a string has not
		}
		re, err := regexp.Compile(r.Regex)
		if err != nil {
			return nil, fmt.Errorf("secret rule %s: %w", r.ID, err)
		}
		sr := secretRule{id: r.ID, re: re, secretGroup: r.SecretGroup, entropy: r.Entropy, maxLen: maxLen(re), run: needRun(re)}
		for _, k := range r.Keywords {
			k = strings.ToLower(k)
			if k == "" {
				continue
			}
			i, ok := kw[k]
			if !ok {
				i = len(s.keywords)
				kw[k] = i
				s.keywords = append(s.keywords, k)
			}
			sr.keywords = append(sr.keywords, i)
		}
		for _, a := range r.Allowlists {
			al, err := compileAllowlist(a)
			if err != nil {
				return nil, fmt.Errorf("secret rule %s: allowlist: %w", r.ID, err)
			}
			sr.allow = append(sr.allow, al)
		}
		s.rules = append(s.rules, sr)
	}
	s.kwset = newKeywordSet(s.keywords)
	s.byKeyword = make([][]int, len(s.keywords))
	for i, r := range s.rules {
		if len(r.keywords) == 0 {
			s.always = append(s.always, i)
		}
		for _, k := range r.keywords {
			s.byKeyword[k] = append(s.byKeyword[k], i)
		}
	}
	return s, nil
}

func compileAllowlist(a tomlAllowlist) (allowlist, error) {
	al := allowlist{and: strings.EqualFold(a.Condition, "AND"), target: a.RegexTarget, hasPaths: len(a.Paths) > 0}
	for _, r := range a.Regexes {
		re, err := regexp.Compile(r)
		if err != nil {
			return al, err
		}
		al.regexes = append(al.regexes, re)
	}
	for _, w := range a.Stopwords {
		al.stopwords = append(al.stopwords, strings.ToLower(w))
	}
	return al, nil
}

// Rules returns the ids of the rules in use.
func (s *Secrets) Rules() []string {
	var ids []string
	for _, r := range s.rules {
		ids = append(ids, r.id)
	}
	return ids
}

// Scan implements Detector.
//
// A rule with keywords runs only where one occurs, and a rule whose
// matches are bounded (maxLen) runs only in windows around its keywords'
// occurrences, wide enough to hold any match containing one (see
// windows): on a large text with few occurrences it reads a small part.
// A match that touches a window's edge is dropped (it may lean on the
// edge for a boundary a full scan would not see); a match containing a
// keyword never does.
func (s *Secrets) Scan(text string) []Finding {
	if len(text) < 8 {
		return nil
	}
	var hits [][]int // start offsets of each keyword; nil: none found
	s.kwset.each(text, func(start, k int) {
		if hits == nil {
			hits = make([][]int, len(s.keywords))
		}
		hits[k] = append(hits[k], start)
	})
	todo := s.always // the rules to run, in order: those without keywords and those of the keywords found
	if hits != nil {
		todo = slices.Clone(s.always)
		for k, h := range hits {
			if len(h) > 0 {
				todo = append(todo, s.byKeyword[k]...)
			}
		}
		slices.Sort(todo)
		todo = slices.Compact(todo)
	}
	var out []Finding
	var spans []span
	for _, i := range todo {
		r := &s.rules[i]
		spans = windows(spans[:0], r, hits, s.keywords, len(text))
		for _, w := range spans {
			if !r.run.in(text[w.start:w.end]) {
				continue // no match can be there
			}
			for _, m := range r.re.FindAllStringSubmatchIndex(text[w.start:w.end], -1) {
				if w.start > 0 && m[0] == 0 || w.end < len(text) && m[1] == w.end-w.start {
					continue
				}
				for j := range m {
					if m[j] >= 0 {
						m[j] += w.start
					}
				}
				if f, ok := s.finding(r, text, m); ok {
					out = append(out, f)
				}
			}
		}
	}
	return dedupe(out)
}

// finding checks one match m (absolute submatch offsets) of rule r: its
// secret, the presigned-URL exception, the entropy and the allowlists.
func (s *Secrets) finding(r *secretRule, text string, m []int) (Finding, bool) {
	start, end := m[0], m[1]
	if g := r.secretGroup; g > 0 && 2*g+1 < len(m) && m[2*g] >= 0 {
		start, end = m[2*g], m[2*g+1]
	} else if g == 0 {
		for j := 2; j+1 < len(m); j += 2 {
			if m[j] >= 0 && m[j+1] > m[j] {
				start, end = m[j], m[j+1]
				break
			}
		}
	}
	secret := text[start:end]
	if r.id == "aws-access-token" && presigned(text[:start]) {
		return Finding{}, false
	}
	if r.entropy > 0 && shannon(secret) < r.entropy {
		return Finding{}, false
	}
	if s.global.allows(text, m[0], m[1], secret) || slices.ContainsFunc(r.allow, func(a allowlist) bool { return a.allows(text, m[0], m[1], secret) }) {
		return Finding{}, false
	}
	return Finding{Detector: "secret", Rule: r.id, Offset: start, Length: end - start}, true
}

// allows reports whether the allowlist lets the match text[ms:me] with
// secret through.
func (a allowlist) allows(text string, ms, me int, secret string) bool {
	target := secret
	switch a.target {
	case "match":
		target = text[ms:me]
	case "line":
		ls := strings.LastIndexByte(text[:ms], '\n') + 1
		le := strings.IndexByte(text[me:], '\n')
		if le < 0 {
			le = len(text)
		} else {
			le += me
		}
		target = text[ls:le]
	}
	var checks []bool
	if len(a.regexes) > 0 {
		checks = append(checks, slices.ContainsFunc(a.regexes, func(re *regexp.Regexp) bool { return re.MatchString(target) }))
	}
	if len(a.stopwords) > 0 {
		ls := strings.ToLower(secret)
		checks = append(checks, slices.ContainsFunc(a.stopwords, func(w string) bool { return strings.Contains(ls, w) }))
	}
	if a.hasPaths {
		checks = append(checks, false)
	}
	if len(checks) == 0 {
		return false
	}
	if a.and {
		return !slices.Contains(checks, false)
	}
	return slices.Contains(checks, true)
}

// presigned reports whether before ends in a presigned URL's credential
// parameter.
func presigned(before string) bool {
	return slices.ContainsFunc(credentialParams, func(p string) bool {
		return len(before) >= len(p) && strings.EqualFold(before[len(before)-len(p):], p)
	})
}

// dedupe drops findings whose span lies within an earlier, longer one
// (two rules on the same secret), keeping offsets ascending.
func dedupe(fs []Finding) []Finding {
	if len(fs) < 2 {
		return fs
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if a.Offset != b.Offset {
			return a.Offset - b.Offset
		}
		return b.Length - a.Length
	})
	out := fs[:1]
	for _, f := range fs[1:] {
		last := out[len(out)-1]
		if f.Offset >= last.Offset && f.Offset+f.Length <= last.Offset+last.Length {
			continue
		}
		out = append(out, f)
	}
	return out
}

// shannon is the Shannon entropy of s in bits per byte.
func shannon(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	h, n := 0.0, float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
