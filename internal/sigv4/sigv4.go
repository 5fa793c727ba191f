// Package sigv4 signs HTTP requests with AWS Signature Version 4, for
// upstreams behind IAM: Bedrock AgentCore runtimes and any MCP endpoint that
// wants SigV4 (for example {service}.{region}.api.aws).
//
// The signing itself (canonical request, string to sign, key derivation)
// and everything about credentials (environment, shared config and
// profiles, SSO, web identity, ECS and IMDS, assumed roles that refresh
// themselves) come from aws-sdk-go-v2: the credential chain is large, moves
// with AWS, and is where hand-written code goes subtly wrong, so Switchboard
// adds only what a gateway needs around it. A Signer's Transport reads each
// request body once, signs over those exact bytes, sends them, and when AWS
// answers that the credentials expired (ExpiredToken and friends), refreshes
// them and re-sends once. Credentials, session tokens and signatures are
// never logged.
package sigv4

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/ssocreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	ssotypes "github.com/aws/aws-sdk-go-v2/service/sso/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// DefaultRoleSessionName is the session name of an assumed role when
// Options.RoleSessionName is empty.
const DefaultRoleSessionName = "switchboard"

// Options configure a Signer. Every zero value is a working default.
type Options struct {
	// Service is the SigV4 signing name. "" means InferService of the
	// endpoint's host.
	Service string
	// Region is the SigV4 region. "" means InferRegion of the endpoint's
	// host, then the SDK's (AWS_REGION, AWS_DEFAULT_REGION, the profile's
	// region).
	Region string
	// Profile is the shared-config profile. "" means AWS_PROFILE, else the
	// default chain (environment, default profile, web identity, ECS, IMDS).
	Profile string
	// AssumeRoleARN, when set, signs with that role's temporary credentials
	// (sts:AssumeRole on the base credentials, refreshed before they
	// expire). "" signs with the base credentials.
	AssumeRoleARN string
	// RoleSessionName names the assumed role's session. "" means
	// DefaultRoleSessionName.
	RoleSessionName string
	// Logger receives debug notes (a refresh after an expired-credentials
	// answer); never a secret. Nil discards.
	Logger *slog.Logger
}

// Signer signs requests for one service and region with credentials from
// the AWS chain. Its methods are safe for concurrent use.
type Signer struct {
	service, region string
	profile         string // for the SSO hint: the profile in use
	creds           *aws.CredentialsCache
	sts             *sts.Client // on the base credentials
	signer          *v4.Signer
	log             *slog.Logger
	now             func() time.Time // the signing clock; tests fix it

	refreshMu sync.Mutex // serialises refreshes, so concurrent expiries refresh once
}

// New loads the AWS configuration and credential chain for endpoint (a URL,
// or a bare host) and returns a Signer for it. Credentials are not fetched
// yet: the first request (or Identity) does that, so an SSO session that
// has expired is reported there, with the `aws sso login` hint. It fails
// when no region can be found, or the profile does not exist.
func New(ctx context.Context, endpoint string, opts Options) (*Signer, error) {
	host := endpointHost(endpoint)
	if host == "" {
		return nil, fmt.Errorf("sigv4: endpoint %q has no host", endpoint)
	}
	service := cmp.Or(opts.Service, InferService(host))
	region := cmp.Or(opts.Region, InferRegion(host))
	var load []func(*config.LoadOptions) error
	if opts.Profile != "" {
		load = append(load, config.WithSharedConfigProfile(opts.Profile))
	}
	if region != "" {
		load = append(load, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("sigv4: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("sigv4: no AWS region for %s: set one (--aws-region, aws.region in the config) or AWS_REGION", host)
	}
	profile := cmp.Or(opts.Profile, os.Getenv("AWS_PROFILE"), "default")
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	s := &Signer{service: service, region: cfg.Region, profile: profile, log: log, now: time.Now,
		sts:    sts.NewFromConfig(cfg),
		signer: newSDKSigner()}
	base, ok := cfg.Credentials.(*aws.CredentialsCache)
	if !ok {
		if cfg.Credentials == nil {
			return nil, errors.New("sigv4: the AWS configuration has no credential provider")
		}
		base = aws.NewCredentialsCache(cfg.Credentials)
	}
	s.creds = base
	if opts.AssumeRoleARN != "" {
		name := cmp.Or(opts.RoleSessionName, DefaultRoleSessionName)
		s.creds = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(s.sts, opts.AssumeRoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = name }))
	}
	return s, nil
}

// newSDKSigner returns the SDK's signer, its signing log off (that log
// would hold the canonical request, session token included).
func newSDKSigner() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.LogSigning = false })
}

// Region returns the region the Signer signs for.
func (s *Signer) Region() string { return s.region }

// Service returns the service name the Signer signs for.
func (s *Signer) Service() string { return s.service }

// Identity returns the caller's identity, sts:GetCallerIdentity on the base
// credentials (not the assumed role's): the account, the user id and the
// ARN.
func (s *Signer) Identity(ctx context.Context) (account, userID, arn string, err error) {
	out, err := s.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", "", "", s.credentialError(fmt.Errorf("sigv4: sts:GetCallerIdentity: %w", err))
	}
	return aws.ToString(out.Account), aws.ToString(out.UserId), aws.ToString(out.Arn), nil
}

// Transport returns a RoundTripper that signs each request and sends it
// with base (nil means http.DefaultTransport). It reads the request body
// once and signs over those exact bytes (the payload hash of the canonical
// request; no X-Amz-Content-Sha256 header is added); an empty body hashes
// the empty string. An answer whose AWS error code says the credentials
// expired or are unknown (ExpiredToken, ExpiredTokenException,
// InvalidClientTokenId, RequestExpired, UnrecognizedClientException) makes
// it refresh the credentials and re-sign and re-send the request, once.
func (s *Signer) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{s: s, base: base}
}

type transport struct {
	s    *Signer
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		buf := bytes.NewBuffer(make([]byte, 0, max(req.ContentLength, 0)+bytes.MinRead))
		_, err := buf.ReadFrom(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("sigv4: reading the request body: %w", err)
		}
		body = buf.Bytes()
	} else if req.Body != nil {
		req.Body.Close()
	}
	resp, used, err := t.send(req, body)
	if err != nil {
		return nil, err
	}
	code := expiredCode(resp)
	if code == "" {
		return resp, nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	t.s.log.Debug("sigv4: credentials refused, refreshing and retrying once", "code", code, "status", resp.StatusCode,
		"method", req.Method, "host", req.URL.Host)
	if err := t.s.refresh(req.Context(), used); err != nil {
		return nil, err
	}
	resp, _, err = t.send(req, body)
	return resp, err
}

// send signs a copy of req carrying body with the current credentials and
// sends it; it returns the credentials it used.
func (t *transport) send(req *http.Request, body []byte) (*http.Response, aws.Credentials, error) {
	ctx := req.Context()
	creds, err := t.s.creds.Retrieve(ctx)
	if err != nil {
		return nil, aws.Credentials{}, t.s.credentialError(fmt.Errorf("sigv4: retrieving AWS credentials: %w", err))
	}
	r := req.Clone(ctx)
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	} else if req.Body != nil {
		r.Body, r.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	r.ContentLength = int64(len(body))
	if err := t.s.sign(ctx, r, body, creds, t.s.now()); err != nil {
		return nil, creds, err
	}
	resp, err := t.base.RoundTrip(r)
	return resp, creds, err
}

// sign signs r (whose body is body) in place with creds at time now.
func (s *Signer) sign(ctx context.Context, r *http.Request, body []byte, creds aws.Credentials, now time.Time, optFns ...func(*v4.SignerOptions)) error {
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		r.Header.Del(k)
	}
	// The canonical URI is built from URL.EscapedPath and escaped once
	// more (non-S3 services double-escape): pin the encoded form the
	// request goes out with, so an encoded ARN (%3A, %2F) is signed as
	// sent.
	if r.URL.RawPath == "" {
		r.URL.RawPath = r.URL.EscapedPath()
	}
	sum := sha256.Sum256(body)
	if err := s.signer.SignHTTP(ctx, creds, r, hex.EncodeToString(sum[:]), s.service, s.region, now, optFns...); err != nil {
		return fmt.Errorf("sigv4: signing: %w", err)
	}
	return nil
}

// refresh drops the cached credentials if they are still the ones used
// (another request may have refreshed them already) and fetches new ones.
func (s *Signer) refresh(ctx context.Context, used aws.Credentials) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	cur, err := s.creds.Retrieve(ctx)
	if err == nil && cur.AccessKeyID == used.AccessKeyID && cur.SessionToken == used.SessionToken {
		s.creds.Invalidate()
	}
	if _, err := s.creds.Retrieve(ctx); err != nil {
		return s.credentialError(fmt.Errorf("sigv4: refreshing AWS credentials: %w", err))
	}
	return nil
}

// credentialError adds the `aws sso login` hint to an SSO token error.
func (s *Signer) credentialError(err error) error {
	if !isSSOTokenError(err) {
		return err
	}
	return fmt.Errorf("%w; the AWS SSO session has expired or is invalid: run `aws sso login --profile %s`", err, s.profile)
}

func isSSOTokenError(err error) bool {
	var invalid *ssocreds.InvalidTokenError
	var unauthorized *ssotypes.UnauthorizedException
	if errors.As(err, &invalid) || errors.As(err, &unauthorized) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "SSO token") || strings.Contains(msg, "SSO session")
}

// refreshCodes are the AWS error codes after which credentials are
// refreshed and the request retried once.
var refreshCodes = map[string]bool{
	"ExpiredToken":                true,
	"ExpiredTokenException":       true,
	"InvalidClientTokenId":        true,
	"RequestExpired":              true,
	"UnrecognizedClientException": true,
}

// expiredCode returns the refresh code of a 4xx answer ("" for any other):
// from X-Amzn-Errortype, else the JSON body's __type or code, else the XML
// body's <Code>. A body it reads is put back for the caller.
func expiredCode(resp *http.Response) string {
	if resp.StatusCode < 400 || resp.StatusCode > 499 {
		return ""
	}
	if h := resp.Header.Get("X-Amzn-Errortype"); h != "" {
		return refreshCode(h)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	isJSON, isXML := strings.Contains(mt, "json"), strings.Contains(mt, "xml")
	if !isJSON && !isXML || resp.Body == nil {
		return ""
	}
	head, err := peekBody(resp, 64<<10)
	if err != nil {
		return ""
	}
	if isJSON {
		var e jsonError
		if json.Unmarshal(head, &e) != nil {
			return ""
		}
		return refreshCode(e.typ())
	}
	return refreshCode(xmlCode(head))
}

// xmlCode finds the first <Code> element of an AWS XML error.
func xmlCode(b []byte) string {
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "Code" {
			var code string
			if dec.DecodeElement(&code, &se) == nil {
				return strings.TrimSpace(code)
			}
			return ""
		}
	}
}

// refreshCode returns the AWS error type t (see typeName) when it asks for a
// refresh.
func refreshCode(t string) string {
	if t = typeName(t); refreshCodes[t] {
		return t
	}
	return ""
}

// endpointHost returns the lower-case host (no port) of a URL or bare host.
func endpointHost(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		u, err = url.Parse("https://" + endpoint)
		if err != nil {
			return ""
		}
	}
	return strings.ToLower(u.Hostname())
}

var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// InferService returns the SigV4 service of an endpoint host:
// bedrock-agentcore for bedrock-agentcore.{region}.amazonaws.com and its
// subdomains, svc for {svc}.{region}.api.aws, else the first label.
func InferService(host string) string {
	labels := hostLabels(host)
	if len(labels) == 0 {
		return ""
	}
	if svc, _ := awsForm(labels); svc != "" {
		return svc
	}
	return labels[0]
}

// InferRegion returns the region in an endpoint host of the forms
// InferService knows ({….}bedrock-agentcore.{region}.amazonaws.com,
// {svc}.{region}.api.aws), "" for any other.
func InferRegion(host string) string {
	_, region := awsForm(hostLabels(host))
	return region
}

func hostLabels(host string) []string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" {
		return nil
	}
	return strings.Split(host, ".")
}

// awsForm matches the AWS endpoint host forms and returns their service
// and region.
func awsForm(l []string) (service, region string) {
	n := len(l)
	switch {
	case n >= 4 && l[n-2] == "amazonaws" && l[n-1] == "com" && l[n-4] == "bedrock-agentcore" && regionRE.MatchString(l[n-3]):
		return "bedrock-agentcore", l[n-3]
	case n >= 4 && l[n-2] == "api" && l[n-1] == "aws" && regionRE.MatchString(l[n-3]):
		return l[n-4], l[n-3]
	}
	return "", ""
}
