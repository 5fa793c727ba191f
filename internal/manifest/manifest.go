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
//     name once (parameters nested in objects and arrays count too). Words
//     are split at non-letters and at camelCase, lowered, stripped of
//     English stop words (a, the, about, …) and stemmed (Snowball English:
//     remembering and remembers are remember). A query word also finds the
//     words related to it in a small table of the words tools use for the
//     same thing (folder and directory, remember and memory, person and
//     entity; see related), and a query word of three or more letters that
//     is a prefix of an indexed word: each of those counts less (relatedWeight,
//     prefixWeight). Ties keep the catalog's order.
package manifest

import (
	"cmp"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
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
	ix.terms = slices.Sorted(maps.Keys(ix.df))
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
// (a tool's inputSchema), nested ones too (the properties of an object
// property or of an array's items, to maxParamDepth), or each item of a
// prompt's arguments list.
func params(schema json.RawMessage, fn func(name, desc string)) {
	if len(schema) == 0 {
		return
	}
	var obj schemaNode
	if json.Unmarshal(schema, &obj) == nil && obj.Properties != nil {
		obj.walk(0, fn)
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

// maxParamDepth bounds how deep nested parameters are indexed.
const maxParamDepth = 3

// schemaNode is the part of a JSON Schema that search reads.
type schemaNode struct {
	Title       string                `json:"title"`
	Description string                `json:"description"`
	Properties  map[string]schemaNode `json:"properties"`
	Items       *schemaNode           `json:"items"`
}

// UnmarshalJSON takes what it can: a schema that is a boolean, or whose
// fields have other types, reads as empty.
func (n *schemaNode) UnmarshalJSON(b []byte) error {
	type plain schemaNode
	var p plain
	if json.Unmarshal(b, &p) == nil {
		*n = schemaNode(p)
	}
	return nil
}

func (n *schemaNode) walk(depth int, fn func(name, desc string)) {
	if depth >= maxParamDepth {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(n.Properties)) {
		p := n.Properties[name]
		fn(name, strings.TrimSpace(p.Title+" "+p.Description))
		p.walk(depth+1, fn)
	}
	if n.Items != nil {
		if n.Items.Description != "" || n.Items.Title != "" {
			fn("", strings.TrimSpace(n.Items.Title+" "+n.Items.Description))
		}
		n.Items.walk(depth+1, fn)
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
	// Each query word is one concept: itself, the words related to it
	// (relatedWeight) and the indexed words it begins (prefixWeight). An
	// entry's frequency of the concept is the weighted sum of theirs, and
	// the concept's rarity is that of the entries having any of them, so
	// that a rare synonym does not outweigh the word itself.
	type term struct {
		t string
		w float64
	}
	var concepts [][]term
	seen := map[string]bool{}
	for _, qt := range q {
		if seen[qt] {
			continue
		}
		seen[qt] = true
		var c []term
		if ix.df[qt] > 0 {
			c = append(c, term{qt, 1})
		}
		for _, rt := range related[qt] {
			if ix.df[rt] > 0 && !slices.Contains(q, rt) {
				c = append(c, term{rt, relatedWeight})
			}
		}
		if utf8.RuneCountInString(qt) >= 3 {
			i, _ := slices.BinarySearch(ix.terms, qt)
			for ; i < len(ix.terms) && strings.HasPrefix(ix.terms[i], qt); i++ {
				if t := ix.terms[i]; t != qt && !slices.Contains(q, t) && !slices.ContainsFunc(c, func(x term) bool { return x.t == t }) {
					c = append(c, term{t, prefixWeight})
				}
			}
		}
		if len(c) > 0 {
			concepts = append(concepts, c)
		}
	}
	// tf[c][i]: entry i's weighted frequency of concept c.
	tf := make([][]float64, len(concepts))
	idf := make([]float64, len(concepts))
	for ci, c := range concepts {
		tf[ci] = make([]float64, len(ix.docs))
		df := 0.0
		for i, doc := range ix.docs {
			for _, t := range c {
				tf[ci][i] += t.w * float64(doc[t.t])
			}
			if tf[ci][i] > 0 {
				df++
			}
		}
		idf[ci] = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	var hits []Hit
	for i := range ix.docs {
		if kind != "" && ix.entries[i].Kind != kind {
			continue
		}
		score := 0.0
		for ci := range concepts {
			f := tf[ci][i]
			if f == 0 {
				continue
			}
			score += idf[ci] * f * (k1 + 1) / (f + k1*(1-b+b*ix.lens[i]/ix.avg))
		}
		if score > 0 {
			hits = append(hits, Hit{Entry: &ix.entries[i], Score: score})
		}
	}
	slices.SortStableFunc(hits, func(a, b Hit) int { return cmp.Compare(b.Score, a.Score) })
	return hits[:min(limit, len(hits))]
}

// maxTokens bounds the words taken from one text (a huge description
// cannot make indexing slow).
const maxTokens = 4096

// Tokenize splits text into lowercase words: at every rune that is not a
// letter or digit, and between a lower-case letter or digit and an
// upper-case one (readFile → read, file); English stop words are left out
// and the rest stemmed (Snowball English: entities → entiti, listing →
// list).
func Tokenize(text string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) == 0 {
			return
		}
		w := strings.ToLower(string(cur))
		cur = cur[:0]
		if stopWords[w] {
			return
		}
		out = append(out, stem(w))
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

// stem is w's Snowball English stem.
func stem(w string) string {
	env := snowballstem.NewEnv(w)
	english.Stem(env)
	return env.Current()
}

// stopWords are left out of what is indexed and searched: words that say
// nothing of what a tool does.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the of to in on at by for from with about into onto and or
		is are be been it its this that these those my me i we our you your some any as so than then`) {
		stopWords[w] = true
	}
}

// Weights of the words a query word brings in besides itself.
const (
	relatedWeight = 0.8
	prefixWeight  = 0.5
)

// relatedGroups are words that tools and the people asking for them use
// for the same thing; a query word finds the others of its groups. Kept
// small and general: the words of file, memory, web and data tools.
var relatedGroups = []string{
	"folder directory dir",
	"file document",
	"delete remove erase",
	"create make add",
	"find search lookup locate query look",
	"read get fetch open view show load retrieve recall",
	"write save store overwrite put",
	"remember memorize recall memory knowledge",
	"remember memorize store save keep add create",
	"fact observation note information detail",
	"person people someone entity",
	"relationship relation link connection",
	"rename move",
	"compress zip gzip archive",
	"sum add total plus",
	"list enumerate listing",
	"size bytes length",
	"metadata info information stat",
	"modify edit change update replace",
	"picture image photo",
	"environment env variable",
	"url link web page",
	"repeat echo",
}

// related maps a stemmed word to the stems related to it.
var related = map[string][]string{}

func init() {
	for _, g := range relatedGroups {
		var stems []string
		for _, w := range strings.Fields(g) {
			stems = append(stems, stem(w))
		}
		for _, a := range stems {
			for _, b := range stems {
				if a != b && !slices.Contains(related[a], b) {
					related[a] = append(related[a], b)
				}
			}
		}
	}
}
