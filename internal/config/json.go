package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// isJSON reports whether data looks like a JSON object: its first byte
// that is not blank, part of a // or /* */ comment or a byte order mark
// is '{'.
func isJSON(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	for {
		data = bytes.TrimLeft(data, " \t\r\n")
		switch {
		case bytes.HasPrefix(data, []byte("//")):
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				data = data[i:]
				continue
			}
			return false
		case bytes.HasPrefix(data, []byte("/*")):
			if i := bytes.Index(data[2:], []byte("*/")); i >= 0 {
				data = data[2+i+2:]
				continue
			}
			return false
		}
		return len(data) > 0 && data[0] == '{'
	}
}

// maxJSONDepth bounds the nesting of JSON input.
const maxJSONDepth = 100

// parseJSON parses a JSON document, allowing the comments and trailing
// commas of JSONC, into the yaml.Node tree the decoder walks, with line
// numbers. It does not use the YAML parser because JSON is not quite YAML
// (surrogate pair escapes, for one).
func parseJSON(data []byte) (*yaml.Node, error) {
	data = stripJSONC(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	var newlines []int
	for i, b := range data {
		if b == '\n' {
			newlines = append(newlines, i)
		}
	}
	lineAt := func(off int64) int {
		return sort.SearchInts(newlines, int(off)) + 1
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &jsonParser{dec: dec, lineAt: lineAt}
	n, err := p.value(0)
	if err == nil {
		if _, err = dec.Token(); err == nil {
			err = &syntaxError{line: lineAt(dec.InputOffset() - 1), msg: "invalid JSON: data after the top-level value"}
		} else if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	var se *json.SyntaxError
	var syn *syntaxError
	switch {
	case err == nil:
		return n, nil
	case errors.As(err, &syn):
		return nil, err
	case errors.As(err, &se):
		return nil, &syntaxError{line: lineAt(se.Offset - 1), msg: "invalid JSON: " + se.Error()}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return nil, &syntaxError{line: len(newlines) + 1, msg: "invalid JSON: unexpected end of input"}
	}
	return nil, &syntaxError{line: lineAt(dec.InputOffset()), msg: "invalid JSON: " + err.Error()}
}

type jsonParser struct {
	dec    *json.Decoder
	lineAt func(int64) int
}

// value reads the next JSON value as a node.
func (p *jsonParser) value(depth int) (*yaml.Node, error) {
	if depth > maxJSONDepth {
		return nil, &syntaxError{line: p.lineAt(p.dec.InputOffset()), msg: "invalid JSON: nested too deeply"}
	}
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	line := p.lineAt(p.dec.InputOffset() - 1)
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
		if t == '[' {
			n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		}
		for p.dec.More() {
			if n.Kind == yaml.MappingNode {
				key, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				ks, _ := key.(string) // Token guarantees a string key
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ks, Line: p.lineAt(p.dec.InputOffset() - 1)})
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := p.dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t, Style: yaml.DoubleQuotedStyle, Line: line}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(t), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t), Line: line}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t), Line: line}, nil
	default: // nil
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
	}
}

// stripJSONC blanks out // and /* */ comments and trailing commas before
// '}' or ']', keeping every newline so line numbers stay right.
func stripJSONC(data []byte) []byte {
	out := bytes.Clone(data)
	var commas []int // outside strings; trailing ones are blanked once comments are
	inString := false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',':
			commas = append(commas, i)
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := bytes.Index(out[i+2:], []byte("*/"))
			stop := len(out)
			if end >= 0 {
				stop = i + 2 + end + 2
			}
			for ; i < stop; i++ {
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
			i--
		}
	}
	for _, i := range commas {
		if rest := bytes.TrimLeft(out[i+1:], " \t\r\n"); len(rest) > 0 && (rest[0] == '}' || rest[0] == ']') {
			out[i] = ' '
		}
	}
	return out
}
