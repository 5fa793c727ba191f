package config

import "strings"

// keysOf lists the keys of each mapping of the native schema, by the
// mapping's path with names replaced by "*" (see schemaPath). It serves the
// "did you mean" of an unknown key only; TestKeysOfAreAccepted checks that
// the decoder takes every key listed. A mapping not listed gets no
// suggestion.
var keysOf = map[string][]string{
	"": {"listen", "secrets_file", "timeout", "session_idle_timeout", "session_child_idle_timeout",
		"max_body_bytes", "max_message_bytes", "max_sessions", "keep_alive", "allowed_origins", "allowed_hosts",
		"restart", "audit", "log", "metrics", "ui", "tracing", "auth", "tls", "destinations", "namespaces",
		"groups", "clients", "limits"},
	"restart": {"delays", "max_attempts", "retry_after", "retry_max"},
	"audit":   {"path", "log_bodies"},
	"log":     {"level", "file"},
	"metrics": {"enabled", "tool_labels"},
	"ui":      {"enabled"},
	"tracing": {"enabled", "endpoint", "sample_ratio", "service_name"},
	"tls":     {"cert", "key", "client_ca"},
	"auth":    {"required", "resource", "realm", "identity_header", "identity_meta", "oauth"},
	"auth.oauth": {"issuer", "jwks_url", "audiences", "algorithms", "required_scopes", "scopes_supported",
		"groups_claim", "leeway", "jwks_cache_ttl", "jwks_min_refresh"},
	"destinations.*": {"type", "command", "args", "env", "cwd", "isolation", "legacy_sse", "protocol", "url",
		"headers", "forward_headers", "timeout", "arn", "qualifier", "session_mode", "aws"},
	"destinations.*.aws": {"region", "service", "profile", "assume_role_arn", "role_session_name"},
	"namespaces.*": {"servers", "isolated", "extends", "tool_prefix", "tools", "prefix", "overrides",
		"tool_search", "code_mode", "sandbox"},
	"namespaces.*.tools":   {"allow", "deny"},
	"namespaces.*.sandbox": {"timeout", "memory", "max_calls", "max_output", "concurrency"},
	"groups.*":             {"namespaces"},
	"clients.*": {"tokens", "subjects", "groups", "scopes", "cert_names", "destinations", "namespaces",
		"status", "tools", "prompts", "resources", "read_only", "rate_limit"},
	"clients.*.rate_limit": {"rate", "burst"},
}

// nameSections are the mappings whose keys are names the user chose.
var nameSections = map[string]bool{"destinations": true, "namespaces": true, "groups": true, "clients": true}

// schemaPath is parent (a dotted path of mappings) with the names the user
// chose replaced by "*": "destinations.github.aws" → "destinations.*.aws".
func schemaPath(parent string) string {
	if parent == "" {
		return ""
	}
	segs := strings.Split(parent, ".")
	if len(segs) > 1 && nameSections[segs[0]] {
		segs[1] = "*"
	}
	return strings.Join(segs, ".")
}

// suggestKey returns the known key of the mapping at parent nearest to key,
// or "" when none is near enough to be a likely typo: at most two edits,
// and fewer than a third of the longer word.
func suggestKey(parent, key string) string {
	best, bestD := "", 0
	for _, k := range keysOf[schemaPath(parent)] {
		d := editDistance(strings.ToLower(key), k)
		if d == 0 {
			continue
		}
		if best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > 2 || 3*bestD > max(len(key), len(best)) {
		return ""
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment) between a and b, in bytes: insertions, deletions,
// substitutions and transpositions of adjacent bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
