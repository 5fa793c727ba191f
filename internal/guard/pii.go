package guard

import (
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// NationalID is a configured national identifier: a regular expression
// (RE2) and the check its digits must pass: "" none, "luhn", "mod97"
// (ISO 7064, as IBANs and some national ids), "us-ssn" (no 000, 666 or
// 9xx area, no 00 group, no 0000 serial).
type NationalID struct {
	Name    string
	Pattern string
	Check   string
}

// PIIConfig chooses the PII rules. The zero value finds e-mail addresses,
// payment card numbers and IBANs.
type PIIConfig struct {
	Disable     []string // of "email", "card", "iban"
	NationalIDs []NationalID
}

// PII finds personal data: "email" (an address with a dotted domain and a
// top-level domain of letters), "card" (13 to 19 digits, spaces or dashes
// between groups, an issuer's prefix and length, the Luhn check), "iban"
// (a country's length, mod-97 = 1), and each NationalID by its Name.
// Safe for concurrent use.
type PII struct {
	email, card, iban bool
	ids               []piiID
}

type piiID struct {
	name, check string
	re          *regexp.Regexp
}

// domainRe is what follows an e-mail address's "@": labels and a
// top-level domain of letters.
// Compiled on first use (see markupRes).
var domainRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}\b`)
})

// NewPII compiles cfg. An unknown rule in Disable, a national id without
// a name, with a bad pattern or an unknown check is an error.
func NewPII(cfg PIIConfig) (*PII, error) {
	p := &PII{email: true, card: true, iban: true}
	rules := map[string]*bool{"email": &p.email, "card": &p.card, "iban": &p.iban}
	for _, d := range cfg.Disable {
		on, ok := rules[d]
		if !ok {
			return nil, fmt.Errorf("pii: no rule %q (email, card, iban)", d)
		}
		*on = false
	}
	for _, id := range cfg.NationalIDs {
		if id.Name == "" {
			return nil, fmt.Errorf("pii: a national id without a name")
		}
		if !slices.Contains([]string{"", "luhn", "mod97", "us-ssn"}, id.Check) {
			return nil, fmt.Errorf("pii: national id %s: unknown check %q (luhn, mod97, us-ssn)", id.Name, id.Check)
		}
		re, err := regexp.Compile(id.Pattern)
		if err != nil || id.Pattern == "" {
			return nil, fmt.Errorf("pii: national id %s: pattern: %v", id.Name, err)
		}
		p.ids = append(p.ids, piiID{name: id.Name, check: id.Check, re: re})
	}
	return p, nil
}

// Scan implements Detector.
func (p *PII) Scan(s string) []Finding {
	var out []Finding
	add := func(rule string, loc []int) {
		out = append(out, Finding{Detector: "pii", Rule: rule, Offset: loc[0], Length: loc[1] - loc[0]})
	}
	if p.email {
		for off := 0; ; {
			at := strings.IndexByte(s[off:], '@')
			if at < 0 {
				break
			}
			at += off
			off = at + 1
			start := at
			for start > 0 && at-start < 64 && isEmailByte(s[start-1]) {
				start--
			}
			if start == at || start > 0 && isEmailByte(s[start-1]) {
				continue // no local part, or a longer run than one allows
			}
			if m := domainRe().FindStringIndex(s[at+1:]); m != nil {
				add("email", []int{start, at + 1 + m[1]})
			}
		}
	}
	if p.card {
		for _, loc := range digitRuns(s) {
			if c := findCard(s, loc); c != nil {
				add("card", c)
			}
		}
	}
	if p.iban {
		for _, loc := range ibanCandidates(s) {
			add("iban", loc)
		}
	}
	for _, id := range p.ids {
		for _, loc := range id.re.FindAllStringIndex(s, -1) {
			if checkID(id.check, s[loc[0]:loc[1]]) {
				add(id.name, loc)
			}
		}
	}
	return dedupe(out)
}

// digitRuns returns the runs of s made of digits with single spaces or
// dashes between them, 13 digits or more, not next to a letter or digit.
func digitRuns(s string) [][]int {
	var out [][]int
	for a, b := range segments(s, 13, &cardBytes) {
		out = digitRunsIn(out, s, a, b)
	}
	return out
}

// digitRunsIn appends the runs of digitRuns starting in s[a:b].
func digitRunsIn(out [][]int, s string, a, b int) [][]int {
	for i := a; i < b; i++ {
		if !isDigit(s[i]) || i > 0 && isWordByte(s[i-1]) {
			continue
		}
		j, n := i, 0
		for j < len(s) {
			if isDigit(s[j]) {
				j++
				n++
			} else if (s[j] == ' ' || s[j] == '-') && j+1 < len(s) && isDigit(s[j+1]) {
				j++
			} else {
				break
			}
		}
		if n >= 13 && (j == len(s) || !isWordByte(s[j])) {
			out = append(out, []int{i, j})
		}
		i = j
	}
	return out
}

// findCard returns the span of a card number in the run loc of s: the
// whole run, else the longest group-aligned part of it (a number beside a
// time or another number).
func findCard(s string, loc []int) []int {
	run := s[loc[0]:loc[1]]
	if d := digits(run); len(d) <= 19 && validCard(d) {
		return loc
	}
	// Group starts: the run's start and every digit after a separator.
	starts := []int{0}
	for i := 1; i < len(run); i++ {
		if run[i-1] == ' ' || run[i-1] == '-' {
			starts = append(starts, i)
		}
	}
	ends := append(slices.Clone(starts[1:]), len(run)+1)
	for a := range starts {
		for b := len(ends) - 1; b >= a; b-- {
			part := run[starts[a] : ends[b]-1]
			if d := digits(part); len(d) >= 13 && len(d) <= 19 && validCard(d) {
				return []int{loc[0] + starts[a], loc[0] + ends[b] - 1}
			}
		}
	}
	return nil
}

// ibanCandidates returns the spans of s that are IBANs: two capital
// letters of a country, two digits, then the country's length in letters
// and digits, in groups of four or not, checked by mod-97.
func ibanCandidates(s string) [][]int {
	var out [][]int
	for a, b := range segments(s, 15, &ibanBytes) {
		out = ibansIn(out, s, a, b)
	}
	return out
}

// ibansIn appends the IBANs of ibanCandidates starting in s[a:b].
func ibansIn(out [][]int, s string, a, end int) [][]int {
	for i := a; i+4 <= end; i++ {
		if !isUpper(s[i]) || !isUpper(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) || i > 0 && isWordByte(s[i-1]) {
			continue
		}
		want := ibanLength[s[i:i+2]]
		if want == 0 {
			continue
		}
		var b strings.Builder
		j := i
		for j < len(s) && b.Len() < want {
			if isUpper(s[j]) || isDigit(s[j]) {
				b.WriteByte(s[j])
				j++
			} else if s[j] == ' ' && b.Len()%4 == 0 && j+1 < len(s) {
				j++
			} else {
				break
			}
		}
		if b.Len() == want && (j == len(s) || !isWordByte(s[j])) && validIBAN(b.String()) {
			out = append(out, []int{i, j})
			i = j
		}
	}
	return out
}

// cardBytes and ibanBytes are the bytes a card number's and an IBAN's
// span is made of (the shortest: 13 and 15 bytes).
var cardBytes, ibanBytes = func() (c, i [256]bool) {
	for b := '0'; b <= '9'; b++ {
		c[b], i[b] = true, true
	}
	for b := 'A'; b <= 'Z'; b++ {
		i[b] = true
	}
	c[' '], c['-'], i[' '] = true, true, true
	return
}()

// segments yields the maximal runs [a, b) of s of at least n bytes in
// class. Elsewhere it reads about one byte in n: a byte not in class
// rules out every run of n through it.
func segments(s string, n int, class *[256]bool) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for i := n - 1; i < len(s); {
			if !class[s[i]] {
				i += n
				continue
			}
			a, b := i, i+1
			for a > 0 && class[s[a-1]] {
				a--
			}
			for b < len(s) && class[s[b]] {
				b++
			}
			if b-a >= n && !yield(a, b) {
				return
			}
			i = b + n
		}
	}
}

func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isUpper(c byte) bool    { return c >= 'A' && c <= 'Z' }
func isWordByte(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'z' || isUpper(c) || c == '_' }

func isEmailByte(c byte) bool {
	return c == '.' || c == '_' || c == '%' || c == '+' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func digits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

func luhn(d string) bool {
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			if n *= 2; n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return len(d) > 1 && sum%10 == 0
}

// validCard: an issuer's prefix and length, then Luhn.
func validCard(d string) bool {
	n := len(d)
	p2, _ := strconv.Atoi(d[:2]) // d is digits
	p3, _ := strconv.Atoi(d[:3])
	p4, _ := strconv.Atoi(d[:4])
	ok := false
	switch {
	case d[0] == '4': // Visa
		ok = n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		ok = n == 16
	case p2 == 34 || p2 == 37: // American Express
		ok = n == 15
	case p4 == 6011 || p2 == 65 || p3 >= 644 && p3 <= 649: // Discover
		ok = n >= 16 && n <= 19
	case p4 >= 3528 && p4 <= 3589: // JCB
		ok = n >= 16 && n <= 19
	case p2 == 36 || p2 == 38 || p3 >= 300 && p3 <= 305: // Diners Club
		ok = n >= 14 && n <= 19
	case p2 == 62: // UnionPay
		ok = n >= 16 && n <= 19
	}
	return ok && luhn(d)
}

// ibanLength is the length of each country's IBAN (SWIFT's IBAN registry).
var ibanLength = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
	"RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

func validIBAN(s string) bool {
	if ibanLength[s[:2]] != len(s) {
		return false
	}
	return mod97(s[4:]+s[:4]) == 1
}

// mod97 is ISO 7064 MOD 97-10 of s, letters counting as 10–35; -1 for
// other characters.
func mod97(s string) int {
	r := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			r = (r*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			r = (r*100 + int(c-'A') + 10) % 97
		case c >= 'a' && c <= 'z':
			r = (r*100 + int(c-'a') + 10) % 97
		default:
			return -1
		}
	}
	if s == "" {
		return -1
	}
	return r
}

func checkID(check, s string) bool {
	switch check {
	case "luhn":
		return luhn(digits(s))
	case "mod97":
		return mod97(strings.Map(func(r rune) rune {
			if r == ' ' || r == '-' || r == '.' {
				return -1
			}
			return r
		}, s)) == 1
	case "us-ssn":
		d := digits(s)
		if len(d) != 9 {
			return false
		}
		area, _ := strconv.Atoi(d[:3]) // d is digits
		group, _ := strconv.Atoi(d[3:5])
		serial, _ := strconv.Atoi(d[5:])
		return area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
	}
	return true
}
