package config

import "time"

// Connections bounds what clients' connections may hold of the gateway
// (`connections`), so that no client, address or flood can starve the
// others or the probes. Every field but GetStreams takes effect on restart
// only (the listener is set up once); GetStreams applies on reload.
type Connections struct {
	// Max caps the client connections held open, all listeners together
	// (`max`). At the cap the connection idle longest (kept alive between
	// requests, or opened without a complete request head) is closed for
	// a new one. 0 (the default): min(1024, ¾ of the file-descriptor
	// limit); -1: no cap.
	Max int `yaml:"max" min:"-1"`

	// Reserved is how many connections beyond Max are kept for the
	// gateway's probes and scrapes (`reserved`): when every connection
	// under the cap is busy, a new one is still accepted into the reserve,
	// where only GET /healthz, /readyz, /health and /metrics are served
	// (anything else gets 503 and the connection is closed). Default 16;
	// 0: no reserve.
	Reserved int `yaml:"reserved" min:"0"`

	// PerAddress caps the connections of one client IP address
	// (`per_address`); over it the address's connection idle longest is
	// closed for the new one, or, when all are busy, the new one goes to
	// the reserve. Default 0: no bound per address (behind a reverse proxy
	// every client has the proxy's address).
	PerAddress int `yaml:"per_address" min:"0"`

	// PerClient caps the requests in progress of one authenticated client
	// (`per_client`), streams included: on HTTP/1.1 each holds a
	// connection. Beyond it the request gets 429. 0 (the default): half of
	// the connection cap (Max); -1: no bound. Without auth there are no
	// clients and no bound.
	PerClient int `yaml:"per_client" min:"-1"`

	// GetStreams caps the concurrent GET listen streams of one session
	// on /{destination}/mcp (`get_streams`); one more gets 409 Conflict.
	// Default 8; always > 0.
	GetStreams int `yaml:"get_streams" min:"1"`

	// ReadHeaderTimeout closes a connection whose request head does not
	// arrive whole within it (`read_header_timeout`): a silent or one-byte
	// connection. Default 10s; always > 0.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" min:"1"`

	// BodyTimeout bounds the whole of a request body's arrival, from the
	// first read (`body_timeout`); a body still incomplete then gets 408.
	// The body idle bound (no byte for 30 s) applies besides. Default 1m;
	// "0s": no bound.
	BodyTimeout time.Duration `yaml:"body_timeout" min:"0"`
}

// Defaults of Connections.
const (
	DefaultConnReserved      = 16
	DefaultGetStreams        = 8
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = time.Minute
)
