package config

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// TestUpstreamOAuthBlock: the oauth block of an HTTP destination decodes
// with ${VAR} from the environment, a relative token_dir is resolved
// against the file's directory, and the client secret is a secret value
// (redacted from logs).
func TestUpstreamOAuthBlock(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GH_SECRET": "gh-client-secret-1234"}
	for _, tt := range []struct {
		block string
		want  *UpstreamOAuth
	}{
		{"", nil},
		{"\n    oauth:", &UpstreamOAuth{}},
		{"\n    oauth: {}", &UpstreamOAuth{}},
		{"\n    oauth:\n      client_id: gh-app\n      client_secret: ${GH_SECRET}\n      redirect_url: http://127.0.0.1:8976/callback\n      token_dir: tokens",
			&UpstreamOAuth{ClientID: "gh-app", ClientSecret: "gh-client-secret-1234", RedirectURL: "http://127.0.0.1:8976/callback",
				TokenDir: filepath.Join("/etc/switchboard", "tokens")}},
		{"\n    oauth:\n      callback_url: https://gw.example.com/switchboard/oauth/callback/x",
			&UpstreamOAuth{CallbackURL: "https://gw.example.com/switchboard/oauth/callback/x"}},
		{"\n    oauth:\n      grant: client_credentials\n      client_id: m2m\n      client_secret: ${GH_SECRET}\n      client_metadata_url: https://example.com/sb.json",
			&UpstreamOAuth{Grant: GrantClientCredentials, ClientID: "m2m", ClientSecret: "gh-client-secret-1234", ClientMetadataURL: "https://example.com/sb.json"}},
	} {
		data := "destinations:\n  x:\n    type: streamable_http\n    url: https://h.example.com/mcp" + tt.block + "\n"
		c, err := testLoader(env).parse([]byte(data), "/etc/switchboard/x.yaml")
		if err != nil {
			t.Errorf("%q: %v", tt.block, err)
			continue
		}
		got := c.Destinations["x"].OAuth
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: OAuth = %+v, want %+v", tt.block, got, tt.want)
		}
		if got != nil && got.ClientSecret != "" && !slices.Contains(c.SecretValues(), got.ClientSecret) {
			t.Errorf("%q: the client secret is not among SecretValues", tt.block)
		}
	}
}
