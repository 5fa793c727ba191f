package router

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

func rawItems(n int) ([]json.RawMessage, []string) {
	var out []json.RawMessage
	var keys []string
	for i := range n {
		name := fmt.Sprintf("t%03d", i)
		out = append(out, jsonrpc.Marshal(map[string]string{"name": name}))
		keys = append(keys, name)
	}
	return out, keys
}

type pageResult struct {
	Tools      []struct{ Name string } `json:"tools"`
	NextCursor *string                 `json:"nextCursor"`
	ResultType string                  `json:"resultType"`
}

func TestPagingWalk(t *testing.T) {
	items, keys := rawItems(7)
	version := listVersion(keys)
	var got []string
	var params json.RawMessage
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("too many pages")
		}
		res, e := page(params, "tools", "tools", items, version, 3, nil)
		if e != nil {
			t.Fatal(e)
		}
		var pr pageResult
		if err := json.Unmarshal(res, &pr); err != nil {
			t.Fatal(err)
		}
		for _, tl := range pr.Tools {
			got = append(got, tl.Name)
		}
		if pr.NextCursor == nil {
			if pages != 2 {
				t.Errorf("got %d pages, want 3", pages+1)
			}
			break
		}
		params = jsonrpc.Marshal(map[string]string{"cursor": *pr.NextCursor})
	}
	if fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Errorf("walked %v, want %v", got, keys)
	}
}

func TestPagingEmptyAndExtra(t *testing.T) {
	res, e := page(nil, "tools", "tools", nil, listVersion(nil), 0, map[string]any{"resultType": "complete"})
	if e != nil {
		t.Fatal(e)
	}
	if string(res) != `{"resultType":"complete","tools":[]}` {
		t.Errorf("got %s", res)
	}
	// An empty cursor is the first page.
	items, keys := rawItems(2)
	res, e = page(jsonrpc.Marshal(map[string]string{"cursor": ""}), "tools", "tools", items, listVersion(keys), 0, nil)
	if e != nil || jsonrpc.Member(res, "nextCursor") != nil {
		t.Errorf("got %s, %v", res, e)
	}
}

func TestPagingInvalidCursor(t *testing.T) {
	items, keys := rawItems(5)
	version := listVersion(keys)
	valid := encodeCursor("tools", version, 2)
	bad := map[string]json.RawMessage{
		"garbage":       jsonrpc.Marshal(map[string]string{"cursor": "!!not base64!!"}),
		"foreign":       jsonrpc.Marshal(map[string]string{"cursor": "eyJwYWdlIjoyfQ"}),
		"other list":    jsonrpc.Marshal(map[string]string{"cursor": encodeCursor("prompts", version, 2)}),
		"stale version": jsonrpc.Marshal(map[string]string{"cursor": encodeCursor("tools", "000000000000", 2)}),
		"past the end":  jsonrpc.Marshal(map[string]string{"cursor": encodeCursor("tools", version, 5)}),
		"zero offset":   jsonrpc.Marshal(map[string]string{"cursor": encodeCursor("tools", version, 0)}),
		"not a string":  json.RawMessage(`{"cursor":42}`),
	}
	for name, params := range bad {
		_, e := page(params, "tools", "tools", items, version, 2, nil)
		if e == nil || e.Code != jsonrpc.InvalidParams {
			t.Errorf("%s: got %v, want -32602", name, e)
		}
	}
	if _, e := page(jsonrpc.Marshal(map[string]string{"cursor": valid}), "tools", "tools", items, version, 2, nil); e != nil {
		t.Errorf("valid cursor refused: %v", e)
	}
	// A changed list refuses cursors of the old one.
	items2, keys2 := rawItems(6)
	if _, e := page(jsonrpc.Marshal(map[string]string{"cursor": valid}), "tools", "tools", items2, listVersion(keys2), 2, nil); e == nil {
		t.Error("a cursor of an older list version was accepted")
	}
}
