package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/sigv4"
	"github.com/switchboard-mcp/switchboard/internal/sse"
)

// awsClient is the HTTP client of a streamable_http or sse destination
// with an aws block: every request it sends is signed with SigV4. The
// signer is made on the first dial (finding credentials may read files,
// ask SSO or assume a role) and kept, since its credentials refresh
// themselves; a failed resolution is retried by the next dial. One client
// serves every session of the destination, so they share its connections.
type awsClient struct {
	url string
	aws *config.AWS
	log *slog.Logger

	mu     sync.Mutex
	client *http.Client      // guarded by mu; nil until resolved
	base   http.RoundTripper // guarded by mu: client's transport under the signer
}

// newAWSClient returns the signing client of cfg, or nil when cfg has no
// aws block (its requests go unsigned).
func newAWSClient(cfg *config.Destination, log *slog.Logger) *awsClient {
	if cfg.AWS == nil {
		return nil
	}
	return &awsClient{url: cfg.URL, aws: cfg.AWS, log: log}
}

// get returns the signing client, resolving the signer if need be. A nil
// a returns a nil client: the transports' default, unsigned.
func (a *awsClient) get(ctx context.Context) (*http.Client, error) {
	if a == nil {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client != nil {
		return a.client, nil
	}
	s, err := sigv4.New(ctx, a.url, sigv4Options(a.aws, a.log))
	if err != nil {
		return nil, err
	}
	c := sse.NewHTTPClient()
	a.base = c.Transport
	c.Transport = awsErrors{s.Transport(c.Transport)}
	a.client = c
	return c, nil
}

// sigv4Options translates an aws block; nil is the default chain, with
// everything inferred.
func sigv4Options(a *config.AWS, log *slog.Logger) sigv4.Options {
	if a == nil {
		return sigv4.Options{Logger: log}
	}
	return sigv4.Options{
		Service: a.Service, Region: a.Region, Profile: a.Profile,
		AssumeRoleARN: a.AssumeRoleARN, RoleSessionName: a.RoleSessionName,
		Logger: log,
	}
}

// close drops the idle connections of the client, if it was made.
func (a *awsClient) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	base := a.base
	a.mu.Unlock()
	if t, ok := base.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// awsErrors puts an AWS error answer's type and message into the status
// line of a 4xx response ("403 Forbidden (InvalidSignatureException: The
// request signature we calculated does not match …)"), which the upstream
// transports quote in the errors clients and the log see: AWS answers in
// JSON or XML bodies that they do not show. The body is left as it was.
type awsErrors struct{ next http.RoundTripper }

func (t awsErrors) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 || resp.StatusCode > 499 {
		return resp, err
	}
	if e := awsErrorOf(resp); e != "" {
		resp.Status += " (" + e + ")"
	}
	return resp, nil
}

// awsErrorOf returns "Type: message" of an AWS error answer, one line of at
// most 200 bytes, or "" when resp is none: the type from X-Amzn-Errortype or
// the body (JSON __type, code or Code; XML <Code>), the message from the
// body (JSON message or Message; XML <Message>). The head of the body it
// reads is put back.
func awsErrorOf(resp *http.Response) string {
	typ := resp.Header.Get("X-Amzn-Errortype")
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var msg string
	if resp.Body != nil && (strings.Contains(mt, "json") || strings.Contains(mt, "xml")) {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		var bodyType string
		if strings.Contains(mt, "json") {
			var e struct {
				Type    string `json:"__type"`
				Code    string `json:"code"`
				CodeCap string `json:"Code"`
				Msg     string `json:"message"`
				MsgCap  string `json:"Message"`
			}
			if json.Unmarshal(head, &e) == nil {
				bodyType, msg = firstOf(e.Type, e.Code, e.CodeCap), firstOf(e.Msg, e.MsgCap)
			}
		} else {
			var e struct { // <ErrorResponse><Error>… (query protocol) or <Error>… (REST XML)
				Code     string `xml:"Error>Code"`
				Message  string `xml:"Error>Message"`
				Code2    string `xml:"Code"`
				Message2 string `xml:"Message"`
			}
			if xml.Unmarshal(head, &e) == nil {
				bodyType, msg = firstOf(e.Code, e.Code2), firstOf(e.Message, e.Message2)
			}
		}
		typ = firstOf(typ, bodyType)
	}
	// "ExpiredTokenException:http://…", "com.amazon.coral.service#ExpiredTokenException"
	typ, _, _ = strings.Cut(typ, ":")
	if i := strings.LastIndexByte(typ, '#'); i >= 0 {
		typ = typ[i+1:]
	}
	typ = strings.TrimSpace(typ)
	switch {
	case typ == "" && msg == "":
		return ""
	case typ == "":
		return sse.OneLine(msg)
	case msg == "":
		return sse.OneLine(typ)
	}
	return sse.OneLine(typ + ": " + msg)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
