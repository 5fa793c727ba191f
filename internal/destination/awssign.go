package destination

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/sigv4"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// awsClient is the HTTP client of a streamable_http or sse destination
// with an aws block: every request it sends is signed with SigV4. The
// signer is made on the first dial (finding credentials may read files,
// ask SSO or assume a role) and kept, since its credentials refresh
// themselves; a failed resolution is retried by the next dial. One client
// serves every session of the destination, so they share its connections.
type awsClient struct {
	url  string
	opts sigv4.Options

	mu     sync.Mutex
	client *http.Client      // guarded by mu; nil until resolved
	base   http.RoundTripper // guarded by mu: client's transport under the signer
}

// newAWSClient returns the signing client of h, or nil when h has no AWS
// options (its requests go unsigned). log is the signer's unless the
// options name one.
func newAWSClient(h *HTTP, log *slog.Logger) *awsClient {
	if h.AWS == nil {
		return nil
	}
	opts := *h.AWS
	if opts.Logger == nil {
		opts.Logger = log
	}
	return &awsClient{url: h.URL, opts: opts}
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
	s, err := sigv4.New(ctx, a.url, a.opts)
	if err != nil {
		return nil, err
	}
	c := upstream.NewHTTPClient()
	a.base = c.Transport
	c.Transport = sigv4.ErrorStatus(s.Transport(c.Transport)) // a refusal's reason in the status line
	a.client = c
	return c, nil
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
