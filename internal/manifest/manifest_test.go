package manifest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTokenize(t *testing.T) {
	cases := map[string][]string{
		"read_text_file":               {"read", "text", "file"},
		"createEntities":               {"creat", "entiti"},
		"List all files in a dir.":     {"list", "all", "file", "dir"},
		"get-tiny-image v2 HTTPStatus": {"get", "tini", "imag", "v2", "httpstatus"},
		"class glass":                  {"class", "glass"},
		"remembering Remembers":        {"rememb", "rememb"},
		"the of about":                 nil,
		"":                             nil,
	}
	for in, want := range cases {
		if got := Tokenize(in); !slices.Equal(got, want) {
			t.Errorf("Tokenize(%q) = %q, want %q", in, got, want)
		}
	}
}

func catalog() []Entry {
	return []Entry{
		{Kind: KindTool, Name: "everything__echo", Server: "everything", Tool: "echo", Description: "Echoes back the input"},
		{Kind: KindTool, Name: "fs__read_text_file", Server: "fs", Tool: "read_text_file",
			Description: "Read the complete contents of a file from the file system as text.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where the file is"},"head":{"type":"number"}}}`)},
		{Kind: KindTool, Name: "fs__list_directory", Server: "fs", Tool: "list_directory",
			Description: "Get a detailed listing of all files and directories in a specified path."},
		{Kind: KindTool, Name: "memory__create_entities", Server: "memory", Tool: "create_entities",
			Description: "Create multiple new entities in the knowledge graph"},
		{Kind: KindPrompt, Name: "everything__simple_prompt", Server: "everything", Description: "A prompt without arguments"},
		{Kind: KindResource, Name: "test://static/resource/1", Server: "everything", Title: "Resource 1"},
	}
}

func names(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Entry.Name)
	}
	return out
}

func TestSearchRanks(t *testing.T) {
	ix := Build(catalog())
	if got := names(ix.Search("knowledge graph", 5, "")); len(got) == 0 || got[0] != "memory__create_entities" {
		t.Errorf("knowledge graph: %q", got)
	}
	// "file" is in several entries; reading one ranks the reader first.
	if got := names(ix.Search("read a file", 5, "")); len(got) < 2 || got[0] != "fs__read_text_file" {
		t.Errorf("read a file: %q", got)
	}
	// A parameter's description is searched; prefixes count.
	if got := names(ix.Search("where", 5, "")); !slices.Equal(got, []string{"fs__read_text_file"}) {
		t.Errorf("where: %q", got)
	}
	if got := names(ix.Search("direct", 5, "")); len(got) == 0 || got[0] != "fs__list_directory" {
		t.Errorf("direct: %q", got)
	}
	// Kind filter and limit.
	if got := names(ix.Search("prompt", 5, KindPrompt)); !slices.Equal(got, []string{"everything__simple_prompt"}) {
		t.Errorf("prompt kind: %q", got)
	}
	if got := ix.Search("file", 1, ""); len(got) != 1 {
		t.Errorf("limit 1: %d hits", len(got))
	}
	if got := ix.Search("zebra", 5, ""); got != nil {
		t.Errorf("zebra: %v", names(got))
	}
	if got := ix.Search("   ", 5, ""); got != nil {
		t.Errorf("blank query: %v", names(got))
	}
	if ix.Lookup(KindTool, "fs__list_directory") == nil || ix.Lookup(KindPrompt, "fs__list_directory") != nil {
		t.Error("Lookup")
	}
}

func TestBuildEmptyAndBadSchema(t *testing.T) {
	if got := Build(nil).Search("x", 3, ""); got != nil {
		t.Errorf("empty index: %v", got)
	}
	ix := Build([]Entry{{Kind: KindTool, Name: "t", Description: "odd schema", Schema: json.RawMessage(`{"properties":[1,2]`)}})
	if got := names(ix.Search("odd", 3, "")); !slices.Equal(got, []string{"t"}) {
		t.Errorf("bad schema entry: %q", got)
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"read_text_file", "createEntities", "ÄÖÜ straße", "a\x00b", "HTTPServer2Go", strings.Repeat("ab ", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokenize(s)
		if len(toks) > maxTokens {
			t.Fatalf("%d tokens", len(toks))
		}
		for _, tok := range toks {
			if tok == "" || !utf8.ValidString(tok) && utf8.ValidString(s) {
				t.Fatalf("bad token %q of %q", tok, s)
			}
		}
		ix := Build([]Entry{{Kind: KindTool, Name: s, Description: s}})
		ix.Search(s, 5, "")
	})
}
