// Package agentcore dials MCP servers hosted on Amazon Bedrock AgentCore
// Runtime: each MCP message is an InvokeAgentRuntime call,
//
//	POST {endpoint}/runtimes/{percent-encoded ARN}/invocations?qualifier=Q
//
// signed with SigV4 (package sigv4) and carrying the runtime-session header, whose answer
// (JSON or SSE) is MCP's. It is a thin layer over the Streamable HTTP client
// (streamable.ClientConn): its http.Client's transport adds the AgentCore
// headers and then signs, so everything the Streamable client does —
// streaming answers as they arrive, server→client requests, session echo,
// handshake replay after a container restart — applies unchanged.
package agentcore

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/sigv4"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstream/streamable"
)

// SessionHeader names the AgentCore runtime session of a request.
const SessionHeader = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"

// Session modes: how runtime session ids are chosen.
const (
	ModeSession  = "session"  // one id per Dialer (relay process, client session)
	ModeIdentity = "identity" // a stable id derived from the caller's identity
	ModeRequest  = "request"  // a new id per request
)

// DefaultQualifier is the runtime endpoint used when none is configured.
const DefaultQualifier = "DEFAULT"

var arnRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:bedrock-agentcore:([a-z0-9-]+):([0-9]{12}):runtime/([A-Za-z0-9_-]+)$`)

// ParseARN checks a runtime ARN
// (arn:aws[-*]:bedrock-agentcore:REGION:ACCOUNT:runtime/NAME) and returns
// its region.
func ParseARN(arn string) (region string, err error) {
	m := arnRE.FindStringSubmatch(arn)
	if m == nil {
		return "", fmt.Errorf("agentcore: %q is not a runtime ARN (want arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/NAME)", arn)
	}
	return m[2], nil
}

// Signer signs the requests a transport sends (*sigv4.Signer is one).
type Signer interface {
	Transport(base http.RoundTripper) http.RoundTripper
}

// IdentityFunc returns the AWS caller identity (sts:GetCallerIdentity).
type IdentityFunc func(ctx context.Context) (account, userID, arn string, err error)

// Service is the SigV4 signing name of AgentCore calls.
const Service = "bedrock-agentcore"

// Resolve is New with a SigV4 signer from the AWS credential chain: what
// the relay and the gateway use. The signer is built from opts.AWS
// (profile, assumed role) for service bedrock-agentcore, in opts.AWS.Region
// or else the ARN's region; the identity mode's caller identity is
// sts:GetCallerIdentity on the base credentials. opts.Signer and
// opts.Identity are replaced.
func Resolve(ctx context.Context, opts Options) (*Runtime, error) {
	region, err := ParseARN(opts.ARN)
	if err != nil {
		return nil, err
	}
	aws := opts.AWS
	aws.Service = Service
	switch aws.Region {
	case "":
		aws.Region = region
	case region:
	default:
		// The endpoint is the ARN's region's; a signature for another
		// region could only be refused there.
		return nil, fmt.Errorf("agentcore: region %q is not the region of the runtime ARN (%s); leave it out", aws.Region, region)
	}
	aws.Logger = cmp.Or(aws.Logger, opts.Logger)
	endpoint, err := endpointURL(opts.Endpoint, region)
	if err != nil {
		return nil, err
	}
	signer, err := sigv4.New(ctx, endpoint.String(), aws)
	if err != nil {
		return nil, fmt.Errorf("agentcore: %w", err)
	}
	opts.Signer, opts.Identity = signer, signer.Identity
	return New(ctx, opts)
}

// Options configure a Runtime. Zero values are documented per field.
type Options struct {
	ARN       string // the runtime's ARN; required
	Qualifier string // the runtime endpoint; "" means DEFAULT
	// SessionMode is session (zero value), identity or request.
	SessionMode string
	// Endpoint is the service endpoint, without path. "" means
	// AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, then AWS_ENDPOINT_URL, then
	// https://bedrock-agentcore.{region of the ARN}.amazonaws.com.
	Endpoint string
	// AWS configures the signer Resolve builds: Profile, AssumeRoleARN,
	// RoleSessionName, Region ("" means the ARN's) and Logger (nil means
	// Logger below); Service is always bedrock-agentcore. New ignores it.
	AWS sigv4.Options
	// Signer signs every request (Resolve sets it). Nil sends them
	// unsigned (only useful against a test endpoint).
	Signer Signer
	// Identity returns the caller's identity (sts:GetCallerIdentity on the
	// base credentials); required for the identity mode only.
	Identity IdentityFunc
	// ConnectTimeout bounds TCP connect and TLS handshake. Zero means
	// AGENTCORE_CONNECT_TIMEOUT seconds, else 10 s.
	ConnectTimeout time.Duration
	// ReadTimeout bounds the wait for an answer's headers. Zero means
	// AGENTCORE_READ_TIMEOUT seconds, else 300 s.
	ReadTimeout time.Duration
	// MaxMessage is the largest message accepted. Zero means 16 MiB.
	MaxMessage int
	Logger     *slog.Logger // nil discards
}

// Runtime is a resolved AgentCore target: endpoint, invocation URL, HTTP
// client and (identity mode) the caller's session id. Its methods are safe
// for concurrent use.
type Runtime struct {
	opts       Options
	invocation string // the invocation URL
	client     *http.Client
	identityID string // identity mode: the runtime session id
	log        *slog.Logger
}

// New validates opts and resolves the target; in identity mode it asks for
// the caller's identity once.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	region, err := ParseARN(opts.ARN)
	if err != nil {
		return nil, err
	}
	opts.Qualifier = cmp.Or(opts.Qualifier, DefaultQualifier)
	switch opts.SessionMode {
	case "":
		opts.SessionMode = ModeSession
	case ModeSession, ModeIdentity, ModeRequest:
	default:
		return nil, fmt.Errorf("agentcore: session mode must be session, identity or request, not %q", opts.SessionMode)
	}
	if opts.ConnectTimeout == 0 {
		if opts.ConnectTimeout, err = envSeconds("AGENTCORE_CONNECT_TIMEOUT", 10*time.Second); err != nil {
			return nil, err
		}
	}
	if opts.ReadTimeout == 0 {
		if opts.ReadTimeout, err = envSeconds("AGENTCORE_READ_TIMEOUT", 300*time.Second); err != nil {
			return nil, err
		}
	}
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	u, err := endpointURL(opts.Endpoint, region)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{opts: opts, log: opts.Logger,
		invocation: u.String() + "/runtimes/" + escapeARN(opts.ARN) + "/invocations?qualifier=" + url.QueryEscape(opts.Qualifier)}
	if opts.SessionMode == ModeIdentity {
		if opts.Identity == nil {
			return nil, errors.New("agentcore: the identity session mode needs the caller's identity (AWS credentials)")
		}
		account, userID, arn, err := opts.Identity(ctx)
		if err != nil {
			return nil, fmt.Errorf("agentcore: identity session mode: %w", err)
		}
		rt.identityID = IdentitySessionID(account, userID, arn)
	}
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   opts.ConnectTimeout,
		ResponseHeaderTimeout: opts.ReadTimeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   64,
		ForceAttemptHTTP2:     true,
	}
	var signed http.RoundTripper = base
	if opts.Signer != nil {
		signed = opts.Signer.Transport(base)
	}
	// A refusal's reason (its AWS error type and message, or the message
	// alone) goes into the status line the client's error quotes.
	signed = sigv4.ErrorStatus(signed)
	rt.client = &http.Client{Transport: signed, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	return rt, nil
}

// endpointURL resolves the service endpoint: endpoint, else
// AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, else AWS_ENDPOINT_URL, else
// https://bedrock-agentcore.{region}.amazonaws.com.
func endpointURL(endpoint, region string) (*url.URL, error) {
	endpoint = cmp.Or(endpoint, os.Getenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE"), os.Getenv("AWS_ENDPOINT_URL"),
		"https://bedrock-agentcore."+region+".amazonaws.com")
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agentcore: endpoint %q is not an http(s) URL", endpoint)
	}
	return u, nil
}

// URL returns the invocation URL (no secrets in it).
func (rt *Runtime) URL() string { return rt.invocation }

// Dialer returns an upstream.Dialer for one client: the connections it
// dials share one runtime session id (session mode), the caller's
// (identity mode), or take a new one per request (request mode). header is
// sent on every request (e.g. traceparent and tracestate passed through
// from the client); nil is none.
func (rt *Runtime) Dialer(header http.Header) upstream.Dialer {
	var fixed string
	switch rt.opts.SessionMode {
	case ModeSession:
		fixed = "session-" + newUUID()
	case ModeIdentity:
		fixed = rt.identityID
	}
	client := &http.Client{Transport: &invoker{session: fixed, next: rt.client.Transport}, CheckRedirect: rt.client.CheckRedirect}
	return upstream.HTTPDialer(streamable.Dial, streamable.ClientOptions{URL: rt.invocation, Header: header, HTTPClient: client,
		MaxMessage: rt.opts.MaxMessage, Logger: rt.log})
}

// invoker turns the Streamable client's requests into InvokeAgentRuntime
// calls: it sets the runtime session header and answers GET (listen
// stream) and DELETE (end session) itself with 405, as AgentCore offers
// neither; then the next transport signs and sends.
type invoker struct {
	session string // "" means a new id per request
	next    http.RoundTripper
}

func (t *invoker) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost {
		if req.Body != nil {
			req.Body.Close()
		}
		return &http.Response{StatusCode: http.StatusMethodNotAllowed, Status: "405 Method Not Allowed",
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Allow": {"POST"}},
			Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	}
	id := t.session
	if id == "" {
		id = "request-" + newUUID()
	}
	req = req.Clone(req.Context())
	req.Header.Set(SessionHeader, id)
	return t.next.RoundTrip(req)
}

// IdentitySessionID is the identity mode's runtime session id:
// "identity-" and the UUID formed by the first 16 bytes of the SHA-256 of
// the JSON array [account, userID, arn] (no spaces), so that the same
// caller reaches the same microVM across restarts of its client.
func IdentitySessionID(account, userID, arn string) string {
	b, _ := json.Marshal([]string{account, userID, arn})
	sum := sha256.Sum256(b)
	return "identity-" + formatUUID(sum[:16])
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b[:])
}

func formatUUID(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// escapeARN percent-encodes a runtime ARN that ParseARN accepted (letters,
// digits, "-", "_", ":" and "/") as one path segment.
func escapeARN(arn string) string { return arnEscaper.Replace(arn) }

var arnEscaper = strings.NewReplacer(":", "%3A", "/", "%2F")

func envSeconds(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	var f float64
	if _, err := fmt.Sscan(v, &f); err != nil || f <= 0 {
		return 0, fmt.Errorf("agentcore: %s must be a positive number of seconds, not %q", name, v)
	}
	return time.Duration(f * float64(time.Second)), nil
}
