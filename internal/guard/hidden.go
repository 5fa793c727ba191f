package guard

import (
	"unicode"
	"unicode/utf8"
)

// Hidden finds characters a reader does not see but a model or a terminal
// acts on, in one pass over the runes. Rules:
//
//   - "tag": Unicode tag characters U+E0000–E007F (ASCII smuggling), except
//     an emoji subdivision flag (U+1F3F4, 3 to 6 tag letters or digits,
//     U+E007F);
//   - "zero-width": U+200B, U+2060–2064, U+180E, U+FEFF past the start, and
//     ZWJ/ZWNJ (U+200D/U+200C) except between two emoji (ZWJ) or between
//     letters of a joining or Indic script (Arabic, Persian, Devanagari, …);
//   - "bidi": embeddings, overrides and isolates (U+202A–202E,
//     U+2066–2069); marks (U+200E, U+200F, U+061C) only in a string with no
//     right-to-left letter;
//   - "ansi": ESC and the sequence it starts (CSI, OSC up to its end),
//     except ISO-2022 designations (ESC $ B, ESC ( B, … as ISO-2022-JP
//     uses them); "c1": U+0080–U+009F; "control": the other C0 controls
//     but tab, line feed, form feed, vertical tab and carriage return (SO
//     and SI allowed beside an ISO-2022 designation).
//
// A run of one rule's characters is one finding. The zero value is ready.
type Hidden struct{}

// Scan implements Detector.
func (Hidden) Scan(s string) []Finding {
	var out []Finding
	add := func(rule string, off, n int) {
		if k := len(out) - 1; k >= 0 && out[k].Rule == rule && out[k].Offset+out[k].Length == off {
			out[k].Length += n
			return
		}
		out = append(out, Finding{Detector: "hidden", Rule: rule, Offset: off, Length: n})
	}
	rtl, iso := -1, -1 // lazily: does s hold a right-to-left letter, an ISO-2022 designation
	prev := rune(-1)
	for i := 0; i < len(s); {
		if j := plainASCII(s, i); j > i {
			i, prev = j, rune(s[j-1])
			if i == len(s) {
				break
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r < 0x80 && r != 0x1b && (r >= 0x20 && r != 0x7f || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v'):
			// printable ASCII and the usual white space
		case r == 0x1b:
			if l := iso2022(s[i:]); l > 0 {
				i += l
				prev = r
				continue
			}
			l := escLen(s[i:])
			add("ansi", i, l)
			i += l
			prev = r
			continue
		case r == 0x0e || r == 0x0f:
			if iso < 0 {
				iso = b2i(hasISO2022(s))
			}
			if iso == 0 {
				add("control", i, n)
			}
		case r < 0x20 || r == 0x7f:
			add("control", i, n)
		case r >= 0x80 && r <= 0x9f:
			add("c1", i, n)
		case r >= 0xe0000 && r <= 0xe007f:
			add("tag", i, n)
		case r == 0x1f3f4:
			if l := subdivisionFlag(s[i+n:]); l > 0 {
				i += n + l
				prev = 0x1f3f4
				continue
			}
		case r == 0x200d || r == 0x200c:
			next, _ := utf8.DecodeRuneInString(s[i+n:])
			if !(r == 0x200d && isEmoji(prev) && isEmoji(next)) && !(joins(prev) && (joins(next) || !unicode.IsLetter(next))) {
				add("zero-width", i, n)
			}
		case r == 0x200b || (r >= 0x2060 && r <= 0x2064) || r == 0x180e || (r == 0xfeff && i > 0):
			add("zero-width", i, n)
		case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			add("bidi", i, n)
		case r == 0x200e || r == 0x200f || r == 0x061c:
			if rtl < 0 {
				rtl = b2i(hasRTL(s))
			}
			if rtl == 0 {
				add("bidi", i, n)
			}
		}
		prev = r
		i += n
	}
	return out
}

// Word-at-a-time byte tests ("Bit Twiddling Hacks": determine if a word
// has a byte less than n, or equal to n).
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainASCII returns the end of the run of printable ASCII (0x20–0x7e)
// from s[i], eight bytes at a time: it may stop short of the run's end
// (by fewer than eight bytes), never past it.
func plainASCII(s string, i int) int {
	for i+8 <= len(s) {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		del := x ^ (ones * 0x7f)
		if (x|(x-ones*0x20)&^x|(del-ones)&^del)&highs != 0 {
			break // a byte from 0x80 on, a control character or DEL
		}
		i += 8
	}
	return i
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// subdivisionFlag returns the length of the tag letters or digits (3 to 6)
// and the cancel tag that follow a black flag in s, or 0.
func subdivisionFlag(s string) int {
	count := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0xe007f:
			if count >= 3 && count <= 6 {
				return i + n
			}
			return 0
		case (r >= 0xe0061 && r <= 0xe007a) || (r >= 0xe0030 && r <= 0xe0039):
			count++
			if count > 6 {
				return 0
			}
		default:
			return 0
		}
		i += n
	}
	return 0
}

// iso2022 returns the length of the ISO 2022 designation at the start of s
// (ESC, intermediates from $ ( ) * + - . /, a final byte), or 0.
func iso2022(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '$' && (s[1] < '(' || s[1] > '/' || s[1] == ',') {
		return 0
	}
	i := 2
	if s[1] == '$' && i < len(s) && s[i] >= '(' && s[i] <= '/' {
		i++ // ESC $ ( D
	}
	if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
		return i + 1
	}
	return 0
}

func hasISO2022(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && iso2022(s[i:]) > 0 {
			return true
		}
	}
	return false
}

// escLen is the length of the escape sequence at the start of s: a CSI
// (ESC [ parameters intermediates final), an OSC, DCS, SOS, PM or APC
// string up to BEL or ESC \ (or the end), else ESC and one byte.
func escLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[':
		i := 2
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
			i++
		}
		return i
	case ']', 'P', 'X', '^', '_':
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	_, n := utf8.DecodeRuneInString(s[1:])
	return 1 + n
}

// joiningScripts are the scripts in which ZWJ and ZWNJ shape letters.
var joiningScripts = []*unicode.RangeTable{
	unicode.Arabic, unicode.Syriac, unicode.Thaana, unicode.Nko, unicode.Mongolian, unicode.Devanagari,
	unicode.Bengali, unicode.Gurmukhi, unicode.Gujarati, unicode.Oriya, unicode.Tamil, unicode.Telugu,
	unicode.Kannada, unicode.Malayalam, unicode.Sinhala, unicode.Myanmar, unicode.Khmer, unicode.Tibetan,
	unicode.Mn,
}

func joins(r rune) bool { return r > 0x7f && unicode.In(r, joiningScripts...) }

func hasRTL(s string) bool {
	for _, r := range s {
		if r >= 0x590 && unicode.In(r, unicode.Hebrew, unicode.Arabic, unicode.Syriac, unicode.Thaana, unicode.Nko) {
			return true
		}
	}
	return false
}

// isEmoji approximates Extended_Pictographic plus the emoji modifiers and
// variation selector 16 that may stand before a ZWJ.
func isEmoji(r rune) bool {
	switch {
	case r >= 0x1f000 && r <= 0x1faff, r >= 0x2600 && r <= 0x27bf, r >= 0x2300 && r <= 0x23ff,
		r >= 0x2b00 && r <= 0x2bff, r >= 0x2190 && r <= 0x21ff, r == 0xfe0f, r == 0x20e3,
		r == 0xa9, r == 0xae, r == 0x203c, r == 0x2049, r == 0x2122, r == 0x2139,
		r == 0x3030, r == 0x303d, r == 0x3297, r == 0x3299:
		return true
	}
	return false
}
