package config

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Destination types.
const (
	TypeStdio          = "stdio"
	TypeStreamableHTTP = "streamable_http"
	TypeSSE            = "sse"
	TypeAgentCore      = "agentcore"
)

// AgentCore runtime session modes (Destination.SessionMode).
const (
	SessionModeSession  = "session"
	SessionModeIdentity = "identity"
	SessionModeRequest  = "request"
)

// Formats of a configuration file (Config.Format).
const (
	FormatNative  = ""        // Switchboard's schema, mithril-proxy's destinations.yml included
	FormatClient  = "client"  // a client's {"mcpServers": ...} or {"servers": {...}}
	FormatMCProxy = "mcproxy" // MCProxy's mcproxy.json: {"servers": [...]}
)

// Protocol eras of a destination (`protocol`).
const (
	ProtocolAuto   = "auto"   // probe with server/discover, fall back to legacy
	ProtocolLegacy = "legacy" // 2025-11-25 and earlier: initialize handshake, sessions
	ProtocolModern = "modern" // 2026-07-28: stateless
)

// Isolation modes of a stdio destination.
const (
	IsolationShared  = "shared"  // one process serves every client session
	IsolationSession = "session" // one process per client session
)

// Tool prefix policies of a namespace.
const (
	ToolPrefixAlways   = "always"   // every tool is exposed as server__tool
	ToolPrefixConflict = "conflict" // only tools whose names collide are prefixed
	ToolPrefixNever    = "never"    // no prefix; a collision is a runtime error
)

// Config is a loaded configuration. Fields hold their defaults when the file
// leaves them out; the comment of each field names its YAML key and default.
type Config struct {
	// Listen is the address of the HTTP listener (`listen`), host:port.
	// Default "127.0.0.1:8080".
	Listen string `yaml:"listen"`

	// SecretsFile is the secrets file (`secrets_file`). Relative paths are
	// resolved against the configuration file's directory. When empty,
	// secrets.yml and then secrets.yaml beside the configuration file are
	// tried and a missing file is fine; a named file that is missing is an
	// error. The environment variable SECRETS_CONFIG, when set, names the
	// file instead (relative to the working directory). After loading it
	// holds the path that was read, or "" if none.
	SecretsFile string `yaml:"secrets_file"`

	// Timeout bounds each request forwarded upstream (`timeout`, e.g. "30s").
	// Default 30s; 0 disables the bound. The environment variable
	// STDIO_RESPONSE_TIMEOUT_SECS (seconds) replaces it when set.
	Timeout time.Duration `yaml:"timeout" min:"0"`

	// SessionIdleTimeout closes a client session idle that long
	// (`session_idle_timeout`). Default 30m; "0s" disables expiry.
	SessionIdleTimeout time.Duration `yaml:"session_idle_timeout" min:"0"`

	// SessionChildIdleTimeout closes sooner a client session that owns a
	// child process (a stdio destination with `isolation: session`, also
	// through an aggregated endpoint) once it is idle that long
	// (`session_child_idle_timeout`). Default 5m; "0s" means
	// SessionIdleTimeout applies to them too. It is also how long a
	// legacy connection kept for 2026-07-28 clients (era translation)
	// may go unused before it is closed ("0s": 5m).
	SessionChildIdleTimeout time.Duration `yaml:"session_child_idle_timeout" min:"0"`

	// SessionOrphanTimeout ends a session that owns a child process once
	// its client has left without DELETE: it opened a listen stream (GET),
	// then had none open and sent nothing for this long
	// (`session_orphan_timeout`). Default 30s; "0s" turns the rule off,
	// leaving SessionChildIdleTimeout. A client that never opens a GET
	// stream is not subject to it.
	SessionOrphanTimeout time.Duration `yaml:"session_orphan_timeout" min:"0"`

	// MaxChildren caps the processes of each stdio destination with
	// `isolation: session`, its direct and aggregated sessions together
	// (`max_children`). At the cap a new session ends the least recently
	// used idle one (nothing in flight, no stream open), whose process
	// stops; when every one is busy the new session gets 503. Zero (the
	// default) means MaxSessions. Never negative. The legacy connections
	// kept for 2026-07-28 clients (at most 8 per destination) are apart.
	MaxChildren int `yaml:"max_children"`

	// MaxBodyBytes caps client request bodies (`max_body_bytes`, an integer
	// or a size like "16MiB"); larger bodies get 413. Default 16 MiB;
	// always > 0.
	MaxBodyBytes int64 `yaml:"max_body_bytes" min:"1"`

	// MaxMessageBytes caps one message from an upstream
	// (`max_message_bytes`); larger messages fail the request with 502.
	// Default 16 MiB; always > 0.
	MaxMessageBytes int64 `yaml:"max_message_bytes" min:"1"`

	// MaxSessions caps the client sessions of each destination
	// (`max_sessions`). Default 10. The environment variable
	// MAX_STDIO_CONNECTIONS replaces it when set. Always > 0.
	MaxSessions int `yaml:"max_sessions" min:"1"`

	// KeepAlive is the interval of SSE keep-alive comments (`keep_alive`).
	// Default 15s; 0 disables them.
	KeepAlive time.Duration `yaml:"keep_alive" min:"0"`

	// AllowedOrigins lists the origins (scheme://host[:port]) whose browser
	// requests are accepted (`allowed_origins`). A request whose Origin
	// header is neither listed nor a loopback origin
	// (http(s)://localhost, 127.0.0.1 or [::1], any port) gets 403. "*"
	// allows any origin. Default empty: loopback origins only.
	AllowedOrigins []string `yaml:"allowed_origins"`

	// AllowedHosts lists the accepted Host header names, guarding against
	// DNS rebinding (`allowed_hosts`); entries are host names or IPs without
	// a port, "*" allows any. Default empty, which means the loopback names
	// (localhost, 127.0.0.1, ::1) plus the host of Listen.
	AllowedHosts []string `yaml:"allowed_hosts"`

	// Restart is the restart policy of stdio processes (`restart`).
	Restart Restart `yaml:"restart"`

	// Audit configures the audit log (`audit`).
	Audit Audit `yaml:"audit"`

	// Log configures the operational log (`log`).
	Log Log `yaml:"log"`

	// Metrics configures the Prometheus endpoint, /metrics (`metrics`).
	Metrics Metrics `yaml:"metrics"`

	// UI configures the status page, /ui (`ui`).
	UI UI `yaml:"ui"`

	// Tracing configures OpenTelemetry traces (`tracing`). Off unless the
	// block is present.
	Tracing Tracing `yaml:"tracing" decode:"enable"`

	// Connections bounds clients' connections (`connections`,
	// connections.go).
	Connections Connections `yaml:"connections"`

	// Auth configures inbound authentication (`auth`; auth.go).
	Auth Auth `yaml:"auth"`

	// Clients holds the gateway's callers by name (`clients`; auth.go).
	// Nil when none are configured.
	Clients map[string]*Client `yaml:"clients"`

	// ClientOrder lists the keys of Clients in file order: an OAuth token
	// is the first client it matches.
	ClientOrder []string

	// Limits bounds the traffic to destinations (`limits`; auth.go).
	Limits Limits `yaml:"limits"`

	// Guards checks what passes between clients and servers (`guards`;
	// guards.go). Nil when the block is absent: no guard runs.
	Guards *Guards `yaml:"guards" decode:"optional"`

	// TLS serves HTTPS when set (`tls`; auth.go). Read at start, its
	// files reloaded when they change.
	TLS *TLS `yaml:"tls" decode:"optional"`

	// Cluster runs the gateway as one replica of several (`cluster`;
	// cluster.go). Nil (absent, the default): a single replica.
	Cluster *Cluster `yaml:"cluster" decode:"optional"`

	// Destinations holds the upstream servers by name (`destinations`).
	Destinations map[string]*Destination `yaml:"destinations"`

	// Namespaces holds the namespaces by name (`namespaces`).
	Namespaces map[string]*Namespace `yaml:"namespaces"`

	// Groups holds the groups by name (`groups`).
	Groups map[string]*Group `yaml:"groups"`

	// Names lists the keys of Destinations in file order, for
	// deterministic iteration.
	Names []string

	// Format is the kind of file the configuration was read from:
	// FormatNative (""), FormatClient or FormatMCProxy. The gateway answers
	// /health in the shape of the project whose file it was.
	Format string

	// Warnings are problems that do not make the configuration invalid but
	// will likely fail at run time, as "file:line: warning: path: message" (a stdio
	// command that is missing or not executable here). switchboard check
	// prints them; nil when there are none.
	Warnings []string

	// substituted holds values substituted for ${VAR} references in url,
	// headers and env values; see SecretValues.
	substituted []string
}

// Restart is the restart policy of a stdio process that exits unexpectedly.
type Restart struct {
	// Delays are the waits before successive restart attempts (`delays`).
	// Attempt i waits Delays[i], or the last delay once i is past the end;
	// an explicitly empty list restarts at once. Default [500ms, 1s, 2s].
	Delays []time.Duration `yaml:"delays"`

	// MaxAttempts is the number of restarts tried before the destination is
	// marked failed (`max_attempts`). Default len(Delays); 0 never restarts.
	MaxAttempts int `yaml:"max_attempts" min:"0"`

	// RetryAfter is how long a failed destination refuses new work before
	// the next request (or a config reload) starts it again (`retry_after`).
	// Each retry that fails doubles it, up to RetryMax. Default 30s; always
	// > 0.
	RetryAfter time.Duration `yaml:"retry_after" min:"1"`

	// RetryMax caps the doubled RetryAfter (`retry_max`). Default 10m;
	// raised to RetryAfter when smaller.
	RetryMax time.Duration `yaml:"retry_max" min:"0"`
}

// Audit configures the audit log of MCP traffic.
type Audit struct {
	// Path is where the audit log goes (`path`): a file, relative to the
	// configuration file's directory; AuditStderr ("stderr": standard
	// error, beside the operational log); or AuditOff ("off": none).
	// Default "" (not set): the file audit.jsonl in the state directory
	// (see DefaultAuditPath), so that the JSON lines never interleave with
	// the text log.
	Path string `yaml:"path"`

	// LogBodies records request and response bodies (`log_bodies`).
	// Default false; the environment variable AUDIT_LOG_BODIES=1 or true
	// turns it on.
	LogBodies bool `yaml:"log_bodies"`
}

// Values of Audit.Path with a meaning of their own.
const (
	AuditStderr = "stderr" // the audit log on standard error
	AuditOff    = "off"    // no audit log
)

// DefaultAuditPath is the audit log file when audit.path is not set:
// audit.jsonl in the state directory, which is $STATE_DIRECTORY (set by
// systemd's StateDirectory=; its first entry), else
// $XDG_STATE_HOME/switchboard, else ~/.local/state/switchboard. "" when
// none of them can be found (no home directory).
func DefaultAuditPath() string {
	if d, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":"); d != "" {
		return filepath.Join(d, "audit.jsonl")
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "switchboard", "audit.jsonl")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "state", "switchboard", "audit.jsonl")
	}
	return ""
}

// Log configures Switchboard's own log.
type Log struct {
	// Level is the minimum level logged (`level`): debug, info, warn or
	// error. Default "info".
	Level string `yaml:"level"`

	// File is the log file (`file`), relative to the configuration file's
	// directory. Default "": standard error. The environment variable
	// LOG_FILE (relative to the working directory) replaces it when set.
	File string `yaml:"file"`
}

// Metrics configures the Prometheus metrics served at /metrics on the
// listener, behind the same Host and Origin guard as every route. Changes
// take effect on reload.
type Metrics struct {
	// Enabled serves /metrics (`enabled`). Default true: the listener is
	// loopback unless `listen` says otherwise, and the metrics carry no
	// session ids, arguments or secrets. false answers 404.
	Enabled bool `yaml:"enabled"`

	// ToolLabels is how many tool names per destination get a series of
	// their own in switchboard_mcp_tool_calls_total (`tool_labels`). A name
	// is admitted by the first call to it that succeeds, so clients calling
	// made-up names cannot fill the set; once N are admitted, every other
	// name counts as "other". Default 0: no per-tool series (tools/call is
	// still counted by destination). At most MaxToolLabels.
	ToolLabels int `yaml:"tool_labels" min:"0"`
}

// MaxToolLabels bounds Metrics.ToolLabels.
const MaxToolLabels = 1000

// UI configures the live status page served at /ui on the listener
// (read-only; behind the same Host and Origin guard as every route).
type UI struct {
	// Enabled serves /ui and /ui/status.json (`enabled`). Default true;
	// false answers 404. Changes take effect on reload.
	Enabled bool `yaml:"enabled"`
}

// Tracing configures OpenTelemetry traces, exported over OTLP/HTTP
// (protobuf): a server span per MCP request and a client span per upstream
// call, W3C trace context taken from the client and passed on upstream. It
// is read when Switchboard starts; a reload does not change it.
type Tracing struct {
	// Enabled turns tracing on. Default false; a `tracing` block sets it
	// true unless it says `enabled: false`.
	Enabled bool `yaml:"enabled"`

	// Endpoint is the collector's OTLP/HTTP base URL (`endpoint`), such as
	// http://127.0.0.1:4318; spans are posted to its /v1/traces. An http
	// URL is sent in clear text. Default empty: OTEL_EXPORTER_OTLP_ENDPOINT,
	// else http://localhost:4318.
	Endpoint string `yaml:"endpoint"`

	// SampleRatio is the share of traces started here that are recorded
	// (`sample_ratio`, 0 to 1); a client's sampled flag is followed either
	// way. Default 1: every trace.
	SampleRatio float64 `yaml:"sample_ratio"`

	// ServiceName is the service.name resource attribute (`service_name`).
	// Default "switchboard".
	ServiceName string `yaml:"service_name"`
}

// Destination is one upstream MCP server, served under /{Name}/.
type Destination struct {
	// Name is the key in `destinations`; it matches ^[a-zA-Z0-9_-]{1,64}$
	// and is none of the reserved route names (mcp, sse, healthz, metrics).
	Name string

	// Type is TypeStdio, TypeStreamableHTTP, TypeSSE or TypeAgentCore
	// (`type`). Required.
	Type string `yaml:"type"`

	// Command is the program and its leading arguments (`command`), stdio
	// only and required there. No shell ever runs it. The list form is
	// passed as written (any byte but NUL). The YAML string form is split
	// on white space and may hold no shell syntax: quotes, | ; && & > <
	// $( ` a line break, $NAME or a leading ~ is an error showing the list
	// to write instead (${NAME} is Switchboard's own interpolation and
	// fine). A JSON "command" is one program, never split.
	Command []string `yaml:"command" decode:"command" types:"stdio"`

	// Args are appended to Command (`args`), stdio only; passed as written,
	// so `a|b`, `https://h/?a=1&b=2` and `[sh, -c, "x | y"]` mean what they
	// say.
	Args []string `yaml:"args" types:"stdio"`

	// Env holds extra environment variables for the process (`env`), stdio
	// only. Non-string scalars are taken as written (PORT: 8080 is "8080").
	Env map[string]string `yaml:"env" decode:"env" types:"stdio"`

	// Cwd is the process's working directory (`cwd`), stdio only; relative
	// paths are resolved against the configuration file's directory.
	// Default "": Switchboard's working directory. Whether it exists is
	// checked when the process starts, not here.
	Cwd string `yaml:"cwd" types:"stdio"`

	// Isolation is IsolationShared or IsolationSession (`isolation`), stdio
	// only. Default IsolationShared for stdio, "" for other types.
	Isolation string `yaml:"isolation" types:"stdio"`

	// Protocol is the protocol era the server speaks (`protocol`): ProtocolAuto
	// (default, probed with server/discover), ProtocolLegacy (2025-11-25 and
	// earlier: initialize handshake) or ProtocolModern (2026-07-28,
	// stateless). Clients of the other era are translated. Type sse is
	// always legacy.
	Protocol string `yaml:"protocol"`

	// LegacySSE serves the deprecated HTTP+SSE transport at /{Name}/sse and
	// /{Name}/message besides /{Name}/mcp (`legacy_sse`). Default true.
	LegacySSE bool `yaml:"legacy_sse"`

	// URL is the upstream endpoint (`url`), http or https; required for
	// streamable_http and sse, invalid for stdio.
	URL string `yaml:"url" decode:"secret" types:"streamable_http,sse"`

	// Headers are sent with every upstream request (`headers`), HTTP types
	// only. Keys are canonicalised (textproto.CanonicalMIMEHeaderKey);
	// ${VAR} references in values are already resolved, from the
	// destination's secrets first.
	Headers map[string]string `yaml:"headers" decode:"headers" types:"streamable_http,sse"`

	// ForwardHeaders names client request headers passed upstream
	// (`forward_headers`, e.g. Authorization), HTTP types only;
	// canonicalised.
	ForwardHeaders []string `yaml:"forward_headers" types:"streamable_http,sse"`

	// ARN is the Bedrock AgentCore runtime (`arn`), agentcore only and
	// required there:
	// arn:aws[-partition]:bedrock-agentcore:REGION:ACCOUNT:runtime/NAME.
	// Requests go to the region's endpoint unless the environment sets
	// AWS_ENDPOINT_URL_BEDROCK_AGENTCORE or AWS_ENDPOINT_URL.
	ARN string `yaml:"arn" types:"agentcore"`

	// Qualifier is the runtime endpoint invoked (`qualifier`), agentcore
	// only. Default "": DEFAULT.
	Qualifier string `yaml:"qualifier" types:"agentcore"`

	// SessionMode chooses the AgentCore runtime session id (`session_mode`),
	// agentcore only: SessionModeSession (one per client session, the
	// default), SessionModeIdentity (one per AWS caller identity) or
	// SessionModeRequest (a new one per request: stateless servers only).
	SessionMode string `yaml:"session_mode" types:"agentcore"`

	// AWS signs the upstream requests with AWS Signature Version 4
	// (`aws`), for streamable_http, sse and agentcore destinations; it is
	// invalid for stdio. Nil (the key left out) means: HTTP types send
	// requests unsigned; agentcore signs with the default credential chain
	// and no role. The key written with no value (`aws:` or `aws: {}`) is
	// a non-nil AWS of zero values: sign, inferring everything.
	AWS *AWS `yaml:"aws" types:"streamable_http,sse,agentcore"`

	// OAuth makes Switchboard an OAuth 2.1 client of the server
	// (`oauth`), streamable_http and sse only: see UpstreamOAuth. Nil (the
	// key left out): no OAuth. The key written with no value (`oauth:`) is
	// a non-nil UpstreamOAuth of zero values: the authorization code grant
	// with every default.
	OAuth *UpstreamOAuth `yaml:"oauth" decode:"secret" types:"streamable_http,sse"`

	// Timeout overrides Config.Timeout for this destination (`timeout`).
	// Default 0: use Config.Timeout.
	Timeout time.Duration `yaml:"timeout"`

	// ToolPrefix is reserved and always "": namespaces carry the prefix
	// policy. It is not settable from the file.
	ToolPrefix string

	// Secrets holds this destination's entry of the secrets file. For stdio
	// destinations they are extra environment variables and take
	// precedence over Env; for HTTP types they serve ${VAR} references in
	// url and headers. Nil when the secrets file has no entry.
	Secrets Secrets
}

// AWS says how a destination's requests are signed with SigV4. Credentials
// come from the standard chain of the AWS SDK (environment, shared config
// and credentials files, SSO, web identity, ECS, IMDS), seen through
// Profile and AssumeRoleARN. Every field may use ${VAR}.
type AWS struct {
	// Region is the signing region (`region`), like us-east-1. Default "":
	// the region in the endpoint's host name
	// (*.{region}.amazonaws.com, *.{region}.api.aws), else AWS_REGION
	// and the profile's region. For agentcore the ARN names the region: a
	// Region set there must be the same.
	Region string `yaml:"region"`

	// Service is the signing name (`service`), like billing-mcp; HTTP
	// types only. Written, it must be a non-empty token of lower-case
	// letters, digits, '.', '_' and '-'. Default "": inferred from the
	// host: bedrock-agentcore for *.bedrock-agentcore.{region}.amazonaws.com,
	// svc for svc.{region}.api.aws, else the host's first label.
	// agentcore always signs as bedrock-agentcore.
	Service string `yaml:"service" decode:"service"`

	// Profile is the shared-config profile whose credentials sign
	// (`profile`). Default "": AWS_PROFILE, else the default profile.
	Profile string `yaml:"profile"`

	// AssumeRoleARN is an IAM role assumed with sts:AssumeRole on the
	// profile's credentials (`assume_role_arn`),
	// arn:aws[-partition]:iam::ACCOUNT:role/[PATH/]NAME. Its temporary
	// credentials sign, and are refreshed before they expire. Default "":
	// sign with the profile's own credentials.
	AssumeRoleARN string `yaml:"assume_role_arn"`

	// RoleSessionName names the assumed role's session
	// (`role_session_name`): 2 to 64 letters, digits or +=,.@_-; only with
	// AssumeRoleARN. Default "": "switchboard".
	RoleSessionName string `yaml:"role_session_name"`
}

// Namespace is a named subset of destinations served as one aggregated
// MCP server.
type Namespace struct {
	// Name is the key in `namespaces`; same rules as destination names.
	Name string

	// Servers are the destinations it includes (`servers`).
	Servers []string `yaml:"servers"`

	// Isolated keeps the namespace out of the default aggregate and out of
	// groups that do not name it with "!" (`isolated`). Default false.
	Isolated bool `yaml:"isolated"`

	// Extends names namespaces whose servers are included too
	// (`extends`, a name or a list). Cycles are rejected.
	Extends []string `yaml:"extends" decode:"names"`

	// ToolPrefix is ToolPrefixAlways, ToolPrefixConflict or ToolPrefixNever
	// (`tool_prefix`). Default ToolPrefixAlways.
	ToolPrefix string `yaml:"tool_prefix"`

	// Tools filters the aggregated tools (`tools`).
	Tools ToolFilter `yaml:"tools"`

	// Prefix overrides ToolPrefix per server (`prefix`): always, conflict,
	// never, or a custom prefix used instead of the server's name.
	Prefix map[string]string `yaml:"prefix"`
	// Overrides rename, re-describe, hide or annotate tools, by server and
	// the server's own tool name (`overrides`). See ToolOverride.
	Overrides map[string]map[string]*ToolOverride `yaml:"overrides"`
	// ToolSearch adds the search and inspect meta-tools (`tool_search`).
	ToolSearch bool `yaml:"tool_search"`
	// CodeMode is CodeModeOff, CodeModeOn or CodeModeOnly (`code_mode`).
	CodeMode string `yaml:"code_mode" decode:"code_mode"`
	// Sandbox bounds code mode's scripts (`sandbox`); defaults filled.
	Sandbox    Sandbox `yaml:"sandbox"`
	sandboxSet bool
}

// ToolFilter selects tools by name with path.Match globs, matched against
// the exposed (prefixed) tool name. A tool passes when Allow is empty or
// one Allow pattern matches, and no Deny pattern matches.
type ToolFilter struct {
	Allow []string `yaml:"allow"` // `allow`
	Deny  []string `yaml:"deny"`  // `deny`
}

// Group is a named union of namespaces.
type Group struct {
	// Name is the key in `groups`; same rules as destination names, and it
	// may not equal a namespace name.
	Name string

	// Namespaces are the member namespaces (`namespaces`), with any "!"
	// prefix removed. An isolated namespace must be written "!name".
	Namespaces []string `yaml:"namespaces"`

	// Forced lists the members written "!name": isolated namespaces that
	// were included on purpose. The gateway logs a warning for them.
	Forced []string
}

// Defaults.
const (
	DefaultListen             = "127.0.0.1:8080"
	DefaultTimeout            = 30 * time.Second
	DefaultSessionIdleTimeout = 30 * time.Minute
	// DefaultRetryAfter and DefaultRetryMax are Restart's defaults.
	DefaultRetryAfter = 30 * time.Second
	DefaultRetryMax   = 10 * time.Minute
	// DefaultSessionChildIdleTimeout is SessionChildIdleTimeout's default.
	DefaultSessionChildIdleTimeout = 5 * time.Minute
	// DefaultSessionOrphanTimeout is SessionOrphanTimeout's default.
	DefaultSessionOrphanTimeout = 30 * time.Second
	DefaultMaxBodyBytes         = 16 << 20
	DefaultMaxMessageBytes      = 16 << 20
	DefaultMaxSessions          = 10
	DefaultKeepAlive            = 15 * time.Second
	DefaultLogLevel             = "info"
)

// defaultConfig returns a Config holding every default that does not depend
// on other fields. Decoding overwrites it with what the file sets.
func defaultConfig() *Config {
	return &Config{
		Listen:                  DefaultListen,
		Timeout:                 DefaultTimeout,
		SessionIdleTimeout:      DefaultSessionIdleTimeout,
		SessionChildIdleTimeout: DefaultSessionChildIdleTimeout,
		SessionOrphanTimeout:    DefaultSessionOrphanTimeout,
		MaxBodyBytes:            DefaultMaxBodyBytes,
		MaxMessageBytes:         DefaultMaxMessageBytes,
		MaxSessions:             DefaultMaxSessions,
		KeepAlive:               DefaultKeepAlive,
		Restart: Restart{
			// MaxAttempts defaults to len(Delays) once Delays is decoded.
			Delays:     []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second},
			RetryAfter: DefaultRetryAfter,
			RetryMax:   DefaultRetryMax,
		},
		Log:     Log{Level: DefaultLogLevel},
		Metrics: Metrics{Enabled: true},
		UI:      UI{Enabled: true},
		Tracing: Tracing{SampleRatio: 1, ServiceName: "switchboard"},
		Connections: Connections{Reserved: DefaultConnReserved, GetStreams: DefaultGetStreams,
			ReadHeaderTimeout: DefaultReadHeaderTimeout, BodyTimeout: DefaultBodyTimeout},
		Auth:         Auth{Realm: "switchboard"},
		Destinations: map[string]*Destination{},
		Namespaces:   map[string]*Namespace{},
		Groups:       map[string]*Group{},
	}
}

// Load reads and validates the configuration file at path, and the secrets
// file that goes with it. On failure it returns nil and an [Errors] holding
// every problem found.
func Load(path string) (*Config, error) {
	return osLoader.load(path)
}

// Parse is Load for a configuration already in memory. filename is used in
// error messages, and its directory to find the secrets file and resolve
// relative paths; it is not read.
func Parse(data []byte, filename string) (*Config, error) {
	return osLoader.parse(data, filename)
}

// loader holds the process interfaces Load uses, so tests can replace them
// without touching the real environment.
type loader struct {
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error)
}

var osLoader = loader{lookupEnv: os.LookupEnv, readFile: os.ReadFile}

func (l loader) load(path string) (*Config, error) {
	data, err := l.readFile(path)
	if err != nil {
		return nil, Errors{err}
	}
	return l.parse(data, path)
}

// SecretValues returns every value that must not appear in logs: the values
// of the secrets file and the values substituted for ${VAR} references in
// url, headers and env. Values shorter than 4 bytes are left out, since
// redacting them would mangle unrelated text. The result has no duplicates
// and is sorted longest first, so a redactor replacing them in order never
// leaves the tail of a longer secret behind.
func (c *Config) SecretValues() []string {
	var vals []string
	add := func(v string) {
		if len(v) >= 4 {
			vals = append(vals, v)
		}
	}
	for _, d := range c.Destinations {
		for _, v := range d.Secrets {
			add(v)
		}
		if d.OAuth != nil {
			add(d.OAuth.ClientSecret)
		}
	}
	for _, v := range c.substituted {
		add(v)
	}
	if c.Cluster != nil {
		for _, v := range c.Cluster.Keys {
			add(v)
		}
		if c.Cluster.Redis != nil {
			add(urlPassword(c.Cluster.Redis.URL))
		}
	}
	slices.SortFunc(vals, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	return slices.Compact(vals)
}
