// Package manifest is the searchable catalog of one aggregated view: every
// tool, prompt and resource its servers offer, indexed for ranked
// full-text search (the search meta-tool).
//
// Contracts:
//   - Build never fails: it indexes whatever it is given; an entry whose
//     schema is not valid JSON is indexed by its other fields.
//   - An Index is immutable once built and safe for concurrent use; the
//     router builds a new one when a list it came from changed
//     (list_changed), keyed by the lists' versions.
//   - Search ranks with BM25 (k1 1.2, b 0.75) over fields weighted by
//     repetition: the name counts three times, the title and parameter
//     names twice, descriptions, parameter descriptions and the server's
//     name once. Words are split at non-letters and at camelCase, lowered,
//     and a plural "s" is dropped; a query word of three or more letters
//     that is a prefix of an indexed word counts half. Ties keep the
//     catalog's order.
package manifest

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kinds of entries.
const (
	KindTool     = "tool"
	KindPrompt   = "prompt"
	KindResource = "resource" // resources and resource templates
)

// Entry is one item of a view as its clients see it.
type Entry struct {
	Kind string
	// Name is the exposed name (tools, prompts) or the URI (template).
	Name string
	// Server is the server offering it; Tool its name in scripts (a tool's
	// override name, else the server's own name).
	Server, Tool string
	Title        string
	Description  string
	// Schema is a tool's inputSchema or a prompt's arguments (nil: none).
	Schema json.RawMessage
}

// Hit is one search result.
type Hit struct {
	Entry *Entry
	Score float64
}

// Index is a built catalog.
type Index struct {
	entries []Entry
	docs    []map[string]int // term -> weighted frequency, per entry
	lens    []float64
	avg     float64
	df      map[string]int
	terms   []string // every indexed term, sorted (prefix matches)
}

// Field weights (repetitions).
const (
	wName   = 3
	wTitle  = 2
	wParam  = 2
	wDesc   = 1
	wServer = 1
)

// Build indexes entries (kept in the given order).
func Build(entries []Entry) *Index {
	ix := &Index{entries: entries, df: map[string]int{}}
	total := 0.0
	for i := range entries {
		e := &entries[i]
		doc := map[string]int{}
		n := 0
		add := func(text string, w int) {
			for _, t := range Tokenize(text) {
				doc[t] += w
				n += w
			}
		}
		add(e.Name, wName)
		if e.Tool != "" && e.Tool != e.Name {
			add(e.Tool, wName)
		}
		add(e.Title, wTitle)
		add(e.Description, wDesc)
		add(e.Server, wServer)
		params(e.Schema, func(name, desc string) {
			add(name, wParam)
			add(desc, wDesc)
		})
		for t := range doc {
			ix.df[t]++
		}
		ix.docs = append(ix.docs, doc)
		ix.lens = append(ix.lens, float64(n))
		total += float64(n)
	}
	if len(entries) > 0 {
		ix.avg = total / float64(len(entries))
	}
	for t := range ix.df {
		ix.terms = append(ix.terms, t)
	}
	sort.Strings(ix.terms)
	return ix
}

// Len is the number of entries.
func (ix *Index) Len() int { return len(ix.entries) }

// Entries are the entries, in the order given to Build; not to be
// modified.
func (ix *Index) Entries() []Entry { return ix.entries }

// Lookup returns the entry of kind with the exposed name, or nil.
func (ix *Index) Lookup(kind, name string) *Entry {
	for i := range ix.entries {
		if e := &ix.entries[i]; e.Kind == kind && e.Name == name {
			return e
		}
	}
	return nil
}

// params calls fn for each parameter of a JSON Schema object's properties
// (a tool's inputSchema), or each item of a prompt's arguments list.
func params(schema json.RawMessage, fn func(name, desc string)) {
	if len(schema) == 0 {
		return
	}
	var obj struct {
		Properties map[string]struct {
			Description string `json:"description"`
			Title       string `json:"title"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &obj) == nil && obj.Properties != nil {
		names := make([]string, 0, len(obj.Properties))
		for n := range obj.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := obj.Properties[n]
			fn(n, strings.TrimSpace(p.Title+" "+p.Description))
		}
		return
	}
	var args []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if json.Unmarshal(schema, &args) == nil {
		for _, a := range args {
			fn(a.Name, a.Description)
		}
	}
}

// BM25 parameters.
const (
	k1 = 1.2
	b  = 0.75
)

// Search returns up to limit entries ranked for query, best first; kind
// "" searches every kind. Entries matching no query word are left out.
func (ix *Index) Search(query string, limit int, kind string) []Hit {
	q := Tokenize(query)
	if len(q) == 0 || len(ix.entries) == 0 || limit <= 0 {
		return nil
	}
	n := float64(len(ix.entries))
	idf := func(t string) float64 {
		df := float64(ix.df[t])
		return math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	// Each query word's terms: itself, and (half weight) the indexed words
	// it begins.
	type term struct {
		t string
		w float64
	}
	var terms []term
	seen := map[string]bool{}
	for _, qt := range q {
		if seen[qt] {
			continue
		}
		seen[qt] = true
		if ix.df[qt] > 0 {
			terms = append(terms, term{qt, 1})
		}
		if utf8.RuneCountInString(qt) < 3 {
			continue
		}
		i := sort.SearchStrings(ix.terms, qt)
		for ; i < len(ix.terms) && strings.HasPrefix(ix.terms[i], qt); i++ {
			if ix.terms[i] != qt && !seen[ix.terms[i]] {
				terms = append(terms, term{ix.terms[i], 0.5})
			}
		}
	}
	var hits []Hit
	for i, doc := range ix.docs {
		if kind != "" && ix.entries[i].Kind != kind {
			continue
		}
		score := 0.0
		for _, t := range terms {
			tf := float64(doc[t.t])
			if tf == 0 {
				continue
			}
			norm := tf * (k1 + 1) / (tf + k1*(1-b+b*ix.lens[i]/ix.avg))
			score += t.w * idf(t.t) * norm
		}
		if score > 0 {
			hits = append(hits, Hit{Entry: &ix.entries[i], Score: score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}

// maxTokens bounds the words taken from one text (a huge description
// cannot make indexing slow).
const maxTokens = 4096

// Tokenize splits text into lowercase words: at every rune that is not a
// letter or digit, and between a lower-case letter or digit and an
// upper-case one (readFile → read, file); a trailing plural "s" is dropped
// from words of four or more letters not ending in "ss".
func Tokenize(text string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) == 0 {
			return
		}
		w := strings.ToLower(string(cur))
		if len(cur) >= 4 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		out = append(out, w)
		cur = cur[:0]
	}
	prev := rune(0)
	for _, r := range text {
		if len(out) >= maxTokens {
			return out
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
		prev = r
	}
	if len(out) < maxTokens {
		flush()
	}
	return out
}
