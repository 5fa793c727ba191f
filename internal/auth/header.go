package auth

import (
	"net/http"
	"strings"
)

// maxTokenLen bounds a presented credential: longer ones are refused
// before any parsing or hashing.
const maxTokenLen = 16 << 10

// Credential is what a request presents.
type Credential struct {
	// Token is the bearer token or API key; "" when none was presented.
	Token string
	// Malformed explains why the headers could not be read as a
	// credential ("" when they could, or when there were none).
	Malformed string
}

// ParseAuthorization reads the Authorization header value h: "Bearer"
// (any case), one or more spaces, and a token of RFC 6750's b64token
// characters. It returns the token, or a reason the value is not one.
func ParseAuthorization(h string) (token, problem string) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", "the Authorization scheme must be Bearer"
	}
	tok := strings.TrimLeft(rest, " ")
	if problem := tokenProblem(tok, "the Bearer token"); problem != "" {
		return "", problem
	}
	return tok, ""
}

// tokenProblem says what is wrong with tok, named what, or "" when it is
// a credential: not empty, not too long, and of RFC 6750's characters.
func tokenProblem(tok, what string) string {
	switch {
	case tok == "":
		return what + " is empty"
	case len(tok) > maxTokenLen:
		return what + " is too long"
	case !isB64Token(tok):
		return what + " has characters outside RFC 6750's token68 syntax"
	}
	return ""
}

// isB64Token reports whether s is 1*( ALPHA / DIGIT / "-" / "." / "_" /
// "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// credential reads the request's credential: the Authorization header,
// else X-API-Key. Both at once, or either repeated, is malformed.
func credential(r *http.Request) Credential {
	authz, keys := r.Header.Values("Authorization"), r.Header.Values("X-Api-Key")
	switch {
	case len(authz)+len(keys) == 0:
		return Credential{}
	case len(authz)+len(keys) > 1:
		return Credential{Malformed: "more than one credential (Authorization and X-API-Key are exclusive, and neither may repeat)"}
	case len(authz) == 1:
		tok, problem := ParseAuthorization(authz[0])
		return Credential{Token: tok, Malformed: problem}
	}
	k := strings.TrimSpace(keys[0])
	if problem := tokenProblem(k, "the X-API-Key header"); problem != "" {
		return Credential{Malformed: problem}
	}
	return Credential{Token: k}
}

// looksLikeJWT reports whether tok has the three dot-separated parts of a
// JWS compact serialization.
func looksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2 && !strings.HasPrefix(tok, ".")
}
