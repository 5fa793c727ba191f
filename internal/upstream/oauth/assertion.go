package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// newAssertionSigner parses a PEM private key (PKCS #8, SEC 1 EC or PKCS
// #1 RSA) into the signer of private_key_jwt assertions: ES256/384/512
// for the EC curves, RS256 for RSA, EdDSA for Ed25519.
func newAssertionSigner(keyPEM []byte) (jose.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("the client key is not PEM")
	}
	var key crypto.PrivateKey
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("the client key: %v", err)
	}
	var alg jose.SignatureAlgorithm
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			alg = jose.ES256
		case elliptic.P384():
			alg = jose.ES384
		case elliptic.P521():
			alg = jose.ES512
		default:
			return nil, errors.New("the client key's curve is not P-256, P-384 or P-521")
		}
	case *rsa.PrivateKey:
		alg = jose.RS256
	case ed25519.PrivateKey:
		alg = jose.EdDSA
	default:
		return nil, fmt.Errorf("the client key is a %T: want EC, RSA or Ed25519", key)
	}
	return jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
}

// assertionSource gets client-credentials tokens for a client that
// authenticates with a signed JWT (private_key_jwt, RFC 7523 §2.2): each
// token request carries a new assertion (iss = sub = the client id, aud
// = the authorization server's issuer, five minutes' life, a random jti).
type assertionSource struct {
	ctx                        context.Context // carries the HTTP client (oauth2.HTTPClient)
	clientID, tokenURL, issuer string
	scopes                     []string
	signer                     jose.Signer
}

func (s *assertionSource) Token() (*oauth2.Token, error) {
	now := time.Now()
	a, err := jwt.Signed(s.signer).Claims(jwt.Claims{Issuer: s.clientID, Subject: s.clientID,
		Audience: jwt.Audience{s.issuer}, IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-30 * time.Second)),
		Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute)), ID: rand.Text()}).Serialize()
	if err != nil {
		return nil, err
	}
	cfg := clientcredentials.Config{ClientID: s.clientID, TokenURL: s.tokenURL, Scopes: s.scopes, AuthStyle: oauth2.AuthStyleInParams,
		EndpointParams: url.Values{"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}}
	tok, err := cfg.Token(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("client credentials with a signed assertion: %v", errSummary(err))
	}
	return tok, nil
}

// assertionAuthorize answers a 401 for a private_key_jwt client: it
// discovers the authorization server (protected-resource metadata from
// the challenge, then the well-known URLs; then the server's metadata)
// and returns a token source that gets tokens with signed assertions.
func (c *Client) assertionAuthorize(ctx context.Context, req *http.Request, resp *http.Response) (oauth2.TokenSource, error) {
	defer discard(resp)
	cs, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	var metaURLs []string
	var scopes []string
	for _, ch := range cs {
		if u := ch.Params["resource_metadata"]; u != "" {
			metaURLs = append(metaURLs, u)
		}
		if s := ch.Params["scope"]; s != "" && scopes == nil {
			scopes = strings.Fields(s)
		}
	}
	ru, err := url.Parse(c.opts.URL)
	if err != nil {
		return nil, err
	}
	wk := *ru
	wk.RawQuery, wk.Fragment = "", ""
	if p := strings.Trim(ru.Path, "/"); p != "" {
		wk.Path = "/.well-known/oauth-protected-resource/" + p
		metaURLs = append(metaURLs, wk.String())
	}
	wk.Path = "/.well-known/oauth-protected-resource"
	metaURLs = append(metaURLs, wk.String())
	var prm *oauthex.ProtectedResourceMetadata
	for _, u := range metaURLs {
		if prm, err = oauthex.GetProtectedResourceMetadata(ctx, u, c.opts.URL, c.http); err == nil && prm != nil && len(prm.AuthorizationServers) > 0 {
			break
		}
		prm = nil
	}
	if prm == nil {
		return nil, fmt.Errorf("no protected-resource metadata for %s", c.opts.URL)
	}
	asURL := prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, asURL, c.http)
	if err != nil {
		return nil, err
	}
	if asm == nil {
		asm = &oauthex.AuthServerMeta{Issuer: asURL, TokenEndpoint: strings.TrimSuffix(asURL, "/") + "/token"}
	}
	if scopes == nil {
		scopes = prm.ScopesSupported
	}
	src := &assertionSource{ctx: context.WithValue(context.Background(), oauth2.HTTPClient, c.http),
		clientID: c.opts.ClientID, tokenURL: asm.TokenEndpoint, issuer: asm.Issuer, scopes: scopes, signer: c.signer}
	tok, err := src.Token()
	if err != nil {
		return nil, err
	}
	return oauth2.ReuseTokenSourceWithExpiry(tok, src, c.opts.RefreshMargin), nil
}
