package config

import (
	"fmt"
	"strings"
)

// expand replaces the references in s:
//
//	${NAME}         lookup(NAME, false); an error if it is not set
//	${NAME:-word}   as ${NAME}, but word when NAME is unset or empty
//	${env:NAME}     lookup(NAME, true): the environment only
//	$${             a literal "${"
//
// A "$" in any other position is literal. expand returns the result, the
// values it substituted, and one message per bad or unset reference. The
// messages name variables but never contain their values.
func expand(s string, lookup func(name string, envOnly bool) (string, bool)) (out string, subst, errs []string) {
	var b strings.Builder
	for i := 0; i < len(s); {
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "$${"):
			b.WriteString("${")
			i += 3
			continue
		case !strings.HasPrefix(rest, "${"):
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			errs = append(errs, `unterminated "${" (write "$${" for a literal "${")`)
			b.WriteString(rest)
			break
		}
		ref := rest[2:end]
		i += end + 1
		name, def, hasDef := strings.Cut(ref, ":-")
		name, envOnly := strings.CutPrefix(name, "env:")
		if !isEnvName(name) {
			errs = append(errs, fmt.Sprintf("invalid reference ${%s}: want ${NAME}, ${NAME:-default} or ${env:NAME}", ref))
			continue
		}
		v, ok := lookup(name, envOnly)
		switch {
		case hasDef && (!ok || v == ""):
			b.WriteString(def)
		case !ok:
			errs = append(errs, fmt.Sprintf("${%s} is not set", ref))
		default:
			b.WriteString(v)
			subst = append(subst, v)
		}
	}
	return b.String(), subst, errs
}

// isEnvName reports whether s is a portable environment variable name.
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') && !(i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
