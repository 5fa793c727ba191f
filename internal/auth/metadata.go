package auth

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ServeMetadata answers GET /.well-known/oauth-protected-resource[/path]
// with the RFC 9728 protected-resource metadata of the resource at path
// (the gateway's resource itself when there is none). 404 when OAuth is
// not configured.
func (a *Authenticator) ServeMetadata(w http.ResponseWriter, r *http.Request) {
	if !a.OAuth() {
		http.NotFound(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, MetadataPath)
	if !ok || rest != "" && !strings.HasPrefix(rest, "/") {
		http.NotFound(w, r)
		return
	}
	md := a.Metadata(strings.TrimSuffix(rest, "/"))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_ = json.NewEncoder(w).Encode(md)
}

// Metadata is the protected-resource metadata of the resource at endpoint
// ("" the gateway itself).
func (a *Authenticator) Metadata(endpoint string) *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               a.resource + endpoint,
		AuthorizationServers:   []string{a.oauth.Issuer},
		ScopesSupported:        a.oauth.ScopesSupported,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Switchboard MCP gateway",
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
