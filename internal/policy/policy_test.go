package policy

import (
	"encoding/json"
	"testing"
)

func TestAdmits(t *testing.T) {
	f := Filter{Allow: []string{"fs__*", "echo"}, Deny: []string{"*delete*"}}
	for name, want := range map[string]bool{"fs__read": true, "echo": true, "fs__delete_file": false, "other": false} {
		if got := admits(f, name); got != want {
			t.Errorf("admits(%q) = %v, want %v", name, got, want)
		}
	}
	if !admits(Filter{}, "anything") {
		t.Error("an empty filter refused")
	}
}

func TestFilterList(t *testing.T) {
	c := &filtered{acc: &Access{rules: &Rules{Tools: Filter{Deny: []string{"b"}}, ReadOnly: true}}, method: "tools/list", tools: &toolCache{}}
	in := `{"tools":[{"name":"a","annotations":{"readOnlyHint":true}},{"name":"b","annotations":{"readOnlyHint":true}},{"name":"c"}],"nextCursor":"x"}`
	var out struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(c.filter(json.RawMessage(in)), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Tools) != 1 || out.Tools[0].Name != "a" || out.NextCursor != "x" {
		t.Errorf("filtered = %+v", out)
	}
	if ro, known := c.tools.readOnly("c"); !known || ro {
		t.Errorf("c: readOnly %v known %v", ro, known)
	}
	if got := string(c.filter(json.RawMessage(`not json`))); got != "not json" {
		t.Errorf("garbage changed: %q", got)
	}
}
