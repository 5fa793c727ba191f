package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical returns the canonical form of the JSON text b, after RFC 8785
// (JCS): object members sorted by their names' UTF-16 code units, no
// insignificant whitespace, strings with only the escapes JSON requires,
// numbers as ECMAScript prints an IEEE 754 double. Duplicate member names,
// invalid UTF-8, trailing data and numbers beyond a double's range are
// errors. Two texts with the same canonical form mean the same value, so
// a digest of the form is a digest of the value. (No maintained Go JCS
// library was found among the module proxy's offerings; FuzzCanonical
// checks it against encoding/json.)
func Canonical(b []byte) ([]byte, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("canonical: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeStrict(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("canonical: data after the JSON value")
	}
	var out bytes.Buffer
	if err := writeCanonical(&out, v); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// member is one member of an object, in the order read.
type member struct {
	name  string
	value any
}

// decodeStrict reads one value through dec's tokens, so that duplicate
// names are seen (encoding/json keeps the last one silently). Objects are
// []member, arrays []any, numbers json.Number.
func decodeStrict(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("canonical: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var obj []member
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("canonical: %w", err)
				}
				name := k.(string)
				if seen[name] {
					return nil, fmt.Errorf("canonical: duplicate member name %q", name)
				}
				seen[name] = true
				v, err := decodeStrict(dec)
				if err != nil {
					return nil, err
				}
				obj = append(obj, member{name, v})
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, fmt.Errorf("canonical: %w", err)
			}
			if obj == nil {
				obj = []member{}
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeStrict(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, fmt.Errorf("canonical: %w", err)
			}
			return arr, nil
		}
		return nil, fmt.Errorf("canonical: unexpected %v", t)
	}
	return tok, nil // string, json.Number, bool, nil
}

func writeCanonical(out *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		out.WriteString("null")
	case bool:
		out.WriteString(strconv.FormatBool(t))
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("canonical: number %s is not an IEEE 754 double", t)
		}
		out.WriteString(es6Number(f))
	case string:
		return writeString(out, t)
	case []any:
		out.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := writeCanonical(out, e); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	case []member:
		sorted := slices.Clone(t)
		slices.SortFunc(sorted, func(a, b member) int { return compareUTF16(a.name, b.name) })
		out.WriteByte('{')
		for i, m := range sorted {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := writeString(out, m.name); err != nil {
				return err
			}
			out.WriteByte(':')
			if err := writeCanonical(out, m.value); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	default:
		return fmt.Errorf("canonical: unexpected %T", v)
	}
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// sorts member names.
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// writeString writes s as RFC 8785 does (appendQuoted's form of valid
// UTF-8).
func writeString(out *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return errors.New("canonical: string is not valid UTF-8")
	}
	out.Write(appendQuoted(out.AvailableBuffer(), s))
	return nil
}

// es6Number formats f as ECMAScript's Number.prototype.toString does
// (RFC 8785 section 3.2.2.3): the shortest digits that round-trip, plain
// notation for exponents in [-7, 21), e notation with a signed exponent
// otherwise, and -0 as 0.
func es6Number(f float64) string {
	if f == 0 {
		return "0"
	}
	abs := math.Abs(f)
	if abs >= 1e21 || abs < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e-07 and e+21; ECMAScript e-7 and e+21.
		mant, exp, _ := bytes.Cut([]byte(s), []byte("e"))
		sign := exp[0]
		digits := bytes.TrimLeft(exp[1:], "0")
		return string(mant) + "e" + string(sign) + string(digits)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
