package guard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kylelemons/godebug/diff"
)

// PinnedFields are the members of a tool definition a pin covers, in the
// order a diff shows them. Anything else a server adds (_meta, icons,
// execution) may change without a new approval.
var PinnedFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// Definition is the pinned part of one tool: its name, the canonical JSON
// of its PinnedFields (absent ones left out), and the digest of that.
type Definition struct {
	Name      string
	Canonical json.RawMessage
	Digest    string // "sha256:" and 64 hex digits
}

// Define takes one tool as a server listed it (a member of tools/list's
// "tools") and returns its pinned definition. A tool without a string
// name, or whose pinned fields are not valid JSON, is an error.
func Define(tool json.RawMessage) (Definition, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(tool, &all); err != nil {
		return Definition{}, fmt.Errorf("tool definition: %w", err)
	}
	var name string
	if err := json.Unmarshal(all["name"], &name); err != nil || name == "" {
		return Definition{}, errors.New("tool definition: no name")
	}
	pinned := map[string]json.RawMessage{}
	for _, f := range PinnedFields {
		if v, ok := all[f]; ok {
			pinned[f] = v
		}
	}
	c, err := Canonical(mustJSON(pinned))
	if err != nil {
		return Definition{}, fmt.Errorf("tool %q: %w", name, err)
	}
	return Definition{Name: name, Canonical: c, Digest: digest(c)}, nil
}

// InstructionsDigest is the digest of a server's initialize instructions
// (the canonical JSON string).
func InstructionsDigest(instructions string) string {
	c, err := Canonical(mustJSON(instructions))
	if err != nil { // invalid UTF-8: digest the bytes as they are
		c = []byte(instructions)
	}
	return digest(c)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Pin is one approved definition.
type Pin struct {
	Digest     string          `json:"digest"`
	Definition json.RawMessage `json:"definition"` // the canonical pinned fields, for diffs
	ApprovedAt time.Time       `json:"approved_at"`
}

// InstructionsPin is the approved instructions of a server.
type InstructionsPin struct {
	Digest       string    `json:"digest"`
	Instructions string    `json:"instructions"`
	ApprovedAt   time.Time `json:"approved_at"`
}

// ServerPins are the approvals of one destination. A nil Instructions
// means none approved (a server that sends none matches it).
type ServerPins struct {
	Instructions *InstructionsPin `json:"instructions,omitempty"`
	Tools        map[string]Pin   `json:"tools"`
}

// Status is where a listed tool stands against its pins.
type Status string

const (
	Approved Status = "approved" // pinned, same digest
	Changed  Status = "changed"  // pinned under this name, different digest
	New      Status = "new"      // no pin under this name (a renamed tool is new)
	Removed  Status = "removed"  // pinned, not listed any more
)

// ToolState is one tool's standing. Diff is set for Changed: the changed
// fields as unified-style lines ("-" pinned, "+" listed), with up to two
// lines of context.
type ToolState struct {
	Name   string
	Status Status
	Digest string // the listed definition's; the pin's for Removed
	Diff   string
}

// Comparison is a destination's listing against its pins.
type Comparison struct {
	Tools            []ToolState // sorted by name; Removed ones included
	Instructions     Status      // Approved, Changed or New ("" when the server sends none and none is pinned)
	InstructionsDiff string
}

// Pending returns the names of the listed tools that are not Approved.
func (c Comparison) Pending() []string {
	var names []string
	for _, t := range c.Tools {
		if t.Status == Changed || t.Status == New {
			names = append(names, t.Name)
		}
	}
	return names
}

// State returns the standing of the tool name; the zero ToolState when
// it is neither listed nor pinned.
func (c Comparison) State(name string) ToolState {
	i, ok := slices.BinarySearchFunc(c.Tools, name, func(t ToolState, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return ToolState{}
	}
	return c.Tools[i]
}

// Allowed reports whether name is listed and approved: what block mode
// lists and lets through.
func (c Comparison) Allowed(name string) bool { return c.State(name).Status == Approved }

// Clean reports whether everything listed is approved and nothing pinned
// is gone.
func (c Comparison) Clean() bool {
	for _, t := range c.Tools {
		if t.Status != Approved {
			return false
		}
	}
	return c.Instructions == Approved || c.Instructions == ""
}

// Compare sets the listed definitions (and the server's instructions; nil
// when it sent none) against pins. It is a pure function: the caller
// decides what monitor and block mode make of the result.
func Compare(listed []Definition, instructions *string, pins ServerPins) Comparison {
	var c Comparison
	seen := map[string]bool{}
	for _, d := range listed {
		if seen[d.Name] {
			continue // a server listing a name twice: the first counts
		}
		seen[d.Name] = true
		st := ToolState{Name: d.Name, Digest: d.Digest}
		p, ok := pins.Tools[d.Name]
		switch {
		case !ok:
			st.Status = New
		case p.Digest == d.Digest:
			st.Status = Approved
		default:
			st.Status = Changed
			st.Diff = fieldDiff(p.Definition, d.Canonical)
		}
		c.Tools = append(c.Tools, st)
	}
	for name, p := range pins.Tools {
		if !seen[name] {
			c.Tools = append(c.Tools, ToolState{Name: name, Status: Removed, Digest: p.Digest})
		}
	}
	slices.SortFunc(c.Tools, func(a, b ToolState) int { return strings.Compare(a.Name, b.Name) })
	switch {
	case instructions == nil && pins.Instructions == nil:
	case instructions == nil:
		c.Instructions = Changed
		c.InstructionsDiff = lineDiff(pins.Instructions.Instructions, "")
	case pins.Instructions == nil:
		c.Instructions = New
	case pins.Instructions.Digest == InstructionsDigest(*instructions):
		c.Instructions = Approved
	default:
		c.Instructions = Changed
		c.InstructionsDiff = lineDiff(pins.Instructions.Instructions, *instructions)
	}
	return c
}

// Approve records the listed definitions and instructions in pins as
// approved at now: all of them when names is empty (and pins of tools no
// longer listed are dropped), else only the named tools ("instructions"
// names the instructions).
func Approve(pins *ServerPins, listed []Definition, instructions *string, now time.Time, names ...string) {
	want := func(n string) bool { return len(names) == 0 || slices.Contains(names, n) }
	if pins.Tools == nil {
		pins.Tools = map[string]Pin{}
	}
	if len(names) == 0 {
		maps.DeleteFunc(pins.Tools, func(n string, _ Pin) bool {
			return !slices.ContainsFunc(listed, func(d Definition) bool { return d.Name == n })
		})
	}
	for _, d := range listed {
		if want(d.Name) {
			if p, ok := pins.Tools[d.Name]; !ok || p.Digest != d.Digest {
				pins.Tools[d.Name] = Pin{Digest: d.Digest, Definition: d.Canonical, ApprovedAt: now.UTC()}
			}
		}
	}
	if want("instructions") {
		if instructions == nil {
			pins.Instructions = nil
		} else if pins.Instructions == nil || pins.Instructions.Digest != InstructionsDigest(*instructions) {
			pins.Instructions = &InstructionsPin{Digest: InstructionsDigest(*instructions), Instructions: *instructions, ApprovedAt: now.UTC()}
		}
	}
}

// fieldDiff shows the pinned fields that differ between two canonical
// definitions, each field pretty-printed and diffed by line.
func fieldDiff(pinned, listed json.RawMessage) string {
	var a, b map[string]json.RawMessage
	_ = json.Unmarshal(pinned, &a)
	_ = json.Unmarshal(listed, &b)
	var out strings.Builder
	for _, f := range PinnedFields {
		if bytes.Equal(a[f], b[f]) {
			continue
		}
		fmt.Fprintf(&out, "@@ %s @@\n", f)
		out.WriteString(lineDiff(pretty(a[f]), pretty(b[f])))
	}
	return out.String()
}

func pretty(v json.RawMessage) string {
	if v == nil {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s // strings (descriptions) diff by their own lines
	}
	var buf bytes.Buffer
	if json.Indent(&buf, v, "", "  ") != nil {
		return string(v)
	}
	return buf.String()
}

// maxDiffLines bounds the lines a diff shows; the rest is counted.
const maxDiffLines = 200

// lineDiff is a unified-style diff of a and b with two lines of context.
func lineDiff(a, b string) string {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	var out []string
	for _, ch := range diff.DiffChunks(split(a), split(b)) {
		for _, l := range ch.Deleted {
			out = append(out, "-"+l)
		}
		for _, l := range ch.Added {
			out = append(out, "+"+l)
		}
		eq := ch.Equal
		if len(eq) > 4 {
			eq = append(append(slices.Clip(eq[:2]), "…"), eq[len(eq)-2:]...)
		}
		for _, l := range eq {
			out = append(out, " "+l)
		}
	}
	if len(out) > maxDiffLines {
		out = append(out[:maxDiffLines], fmt.Sprintf("… %d more lines", len(out)-maxDiffLines))
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

// PinFile is the pin file: approvals by destination name.
type PinFile struct {
	Version      int                    `json:"version"` // 1
	Destinations map[string]*ServerPins `json:"destinations"`
}

// Server returns the pins of destination name, creating them.
func (f *PinFile) Server(name string) *ServerPins {
	if f.Destinations == nil {
		f.Destinations = map[string]*ServerPins{}
	}
	p := f.Destinations[name]
	if p == nil {
		p = &ServerPins{Tools: map[string]Pin{}}
		f.Destinations[name] = p
	}
	return p
}

// PinPath is where the pins of the config at configPath live: beside it,
// the config's name with ".pins.json" for its extension
// (switchboard.yaml -> switchboard.pins.json).
func PinPath(configPath string) string {
	base := strings.TrimSuffix(configPath, filepath.Ext(configPath))
	return base + ".pins.json"
}

// LoadPins reads a pin file. A missing file is an empty PinFile, not an
// error; an unreadable or malformed one is an error naming the file.
func LoadPins(path string) (*PinFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &PinFile{Version: 1, Destinations: map[string]*ServerPins{}}, nil
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f PinFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("%s: version %d, want 1", path, f.Version)
	}
	if f.Destinations == nil {
		f.Destinations = map[string]*ServerPins{}
	}
	for d, p := range f.Destinations {
		if p == nil {
			return nil, fmt.Errorf("%s: destination %q: null", path, d)
		}
		if p.Tools == nil {
			p.Tools = map[string]Pin{}
		}
	}
	return &f, nil
}

// SavePins writes f to path atomically (a temporary file in the same
// folder, synced, then renamed over it), mode 0600: readers see the old
// file or the new one, never a part.
func SavePins(path string, f *PinFile) error {
	f.Version = 1
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing there
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(append(b, '\n'))
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
