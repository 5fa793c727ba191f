package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// realCatalog is the tools of three real servers, as their tools/list
// answered (testdata/*.tools.json, from the installed peers
// @modelcontextprotocol/server-memory, -everything and -filesystem
// 2026.8.31), exposed as an aggregated view names them (server__tool).
func realCatalog(t *testing.T) *Index {
	t.Helper()
	var entries []Entry
	for _, server := range []string{"memory", "everything", "filesystem"} {
		b, err := os.ReadFile(filepath.Join("testdata", server+".tools.json"))
		if err != nil {
			t.Fatal(err)
		}
		var tools []struct {
			Name        string          `json:"name"`
			Title       string          `json:"title"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(b, &tools); err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools {
			entries = append(entries, Entry{Kind: KindTool, Name: server + "__" + tl.Name, Server: server, Tool: tl.Name,
				Title: tl.Title, Description: tl.Description, Schema: tl.InputSchema})
		}
	}
	return Build(entries)
}

// TestSearchRealTools: what a model asks for, in its own words, finds the
// right tool of real servers first.
func TestSearchRealTools(t *testing.T) {
	ix := realCatalog(t)
	cases := []struct {
		query string
		want  []string // any of these first
	}{
		{"remember a fact about a person", []string{"memory__add_observations", "memory__create_entities"}},
		{"make a new folder", []string{"filesystem__create_directory"}},
		{"rename a file", []string{"filesystem__move_file"}},
		{"delete the relationship between two people", []string{"memory__delete_relations"}},
		{"add two numbers", []string{"everything__get-sum"}},
		{"gzip compress some data", []string{"everything__gzip-file-as-resource"}},
		{"show environment variables", []string{"everything__get-env"}},
		{"overwrite a file with new content", []string{"filesystem__write_file"}},
		{"find files matching a glob pattern", []string{"filesystem__search_files"}},
		{"which directories may the server access", []string{"filesystem__list_allowed_directories"}},
		{"list a folder sorted by size", []string{"filesystem__list_directory_with_sizes"}},
		{"edit lines of a text file", []string{"filesystem__edit_file"}},
		{"long running operation with progress", []string{"everything__trigger-long-running-operation"}},
		{"look up a person by name", []string{"memory__open_nodes", "memory__search_nodes"}},
		{"permissions and size of a file", []string{"filesystem__get_file_info"}},
		{"show a picture", []string{"everything__get-tiny-image"}},
	}
	for _, c := range cases {
		hits := ix.Search(c.query, 3, KindTool)
		got := names(hits)
		ok := len(got) > 0
		if ok {
			ok = false
			for _, w := range c.want {
				ok = ok || got[0] == w
			}
		}
		if !ok {
			t.Errorf("%q found %q first; want one of %q", c.query, got, c.want)
		}
	}
}
