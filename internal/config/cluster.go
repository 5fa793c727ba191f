package config

import (
	"net"
	"net/url"
	"strings"
	"time"
)

// Cluster runs the gateway as one replica of several behind a load
// balancer (`cluster`; docs/cluster.md). Absent (nil, the
// default): a single replica, exactly as without it.
type Cluster struct {
	// ReplicaID is this replica's id in session ids and membership
	// (`replica_id`); "" (the default) means the host name. It must not
	// contain "{" or "}" (Redis hash tags).
	ReplicaID string `yaml:"replica_id"`

	// Listen is an extra listener for the requests other replicas forward
	// here (`listen`, host:port); "" (the default) means they come to the
	// main listener, told apart by their hop signature.
	Listen string `yaml:"listen"`

	// Advertise is the host:port the other replicas reach this one at
	// (`advertise`); "" means this host's name and the port of Listen (or
	// of the main listener).
	Advertise string `yaml:"advertise"`

	// SessionMaxAge is how long a session id opens after it was minted
	// (`session_max_age`). Default 24h; always > 0.
	SessionMaxAge time.Duration `yaml:"session_max_age" min:"1"`

	// Keys are the sealing secrets, at least 32 bytes each (`keys`): the
	// first seals session ids, all open them (rotation: add the new key
	// first, drop the old one once session_max_age has passed). Use
	// ${VAR} references; the values are redacted from every log. Exactly
	// one of Keys and KeysFile.
	Keys []string `yaml:"keys" decode:"secret"`

	// KeysFile is a file holding the secrets, one per line (`keys_file`,
	// a Kubernetes Secret); relative to the configuration file. Read at
	// start.
	KeysFile string `yaml:"keys_file"`

	// Peers is the static membership, replica id → host:port (`peers`);
	// ignored when Redis is configured (the heartbeat decides then).
	Peers map[string]string `yaml:"peers"`

	// HeartbeatTTL is how long after its last heartbeat in Redis a replica
	// counts as dead (`heartbeat_ttl`). Default 15s; at least 1s.
	HeartbeatTTL time.Duration `yaml:"heartbeat_ttl" min:"1"`

	// Redis is the replicas' shared state (`redis`): session records for
	// adoption, the event log, the shared rate limits and membership. Nil
	// (absent): none of them.
	Redis *ClusterRedis `yaml:"redis" decode:"optional"`
}

// ClusterRedis is the Redis a cluster's replicas share (`cluster.redis`).
type ClusterRedis struct {
	// URL is redis://[user[:password]@]host:port[/db], or rediss:// for
	// TLS (`url`); required. Redacted from logs.
	URL string `yaml:"url" decode:"secret"`
	// PasswordEnv names an environment variable holding the password
	// (`password_env`); "" none. At most one of it and PasswordFile.
	PasswordEnv string `yaml:"password_env"`
	// PasswordFile is a file whose first line is the password
	// (`password_file`); "" none.
	PasswordFile string `yaml:"password_file"`
	// TLS adjusts rediss:// (`tls`); zero: the system roots, no client
	// certificate.
	TLS ClusterRedisTLS `yaml:"tls"`
	// KeyPrefix starts every key (`key_prefix`). Default "switchboard:";
	// "" none.
	KeyPrefix string `yaml:"key_prefix"`
	// Events bounds each SSE stream's log (`events`).
	Events ClusterEvents `yaml:"events"`
}

// ClusterRedisTLS are PEM files for rediss:// (`cluster.redis.tls`); ""
// means the default.
type ClusterRedisTLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// ClusterEvents bounds the event log of one SSE stream
// (`cluster.redis.events`).
type ClusterEvents struct {
	// MaxEvents is how many events are kept (`max_events`). Default 1000;
	// always > 0.
	MaxEvents int `yaml:"max_events" min:"1"`
	// MaxAge is how long an event is kept (`max_age`). Default 1h; always
	// > 0.
	MaxAge time.Duration `yaml:"max_age" min:"1"`
}

// Defaults of Cluster.
const (
	DefaultSessionMaxAge = 24 * time.Hour
	DefaultHeartbeatTTL  = 15 * time.Second
	DefaultKeyPrefix     = "switchboard:"
	DefaultMaxEvents     = 1000
	DefaultEventsMaxAge  = time.Hour
	// MinClusterKey is the least length of a sealing secret, in bytes.
	MinClusterKey = 32
)

func (c *Cluster) setDefaults() {
	*c = Cluster{SessionMaxAge: DefaultSessionMaxAge, HeartbeatTTL: DefaultHeartbeatTTL}
}

func (r *ClusterRedis) setDefaults() {
	*r = ClusterRedis{KeyPrefix: DefaultKeyPrefix, Events: ClusterEvents{MaxEvents: DefaultMaxEvents, MaxAge: DefaultEventsMaxAge}}
}

// validateCluster checks the cluster block.
func (d *decoder) validateCluster(c *Config) {
	cl := c.Cluster
	if cl == nil {
		return
	}
	switch {
	case len(cl.Keys) == 0 && cl.KeysFile == "":
		d.errorIn("cluster", "cluster.keys", "required: at least one sealing secret of %d or more random bytes (or keys_file)", MinClusterKey)
	case len(cl.Keys) > 0 && cl.KeysFile != "":
		d.errorAt("cluster.keys_file", "give keys or keys_file, not both")
	}
	for i, k := range cl.Keys {
		if len(k) < MinClusterKey {
			d.errorAt(index("cluster.keys", i), "%d bytes; a sealing secret must be at least %d random bytes (openssl rand -base64 32)", len(k), MinClusterKey)
		}
	}
	if cl.HeartbeatTTL > 0 && cl.HeartbeatTTL < time.Second {
		d.errorAt("cluster.heartbeat_ttl", "%v is below 1s: beats come every third of it", cl.HeartbeatTTL)
	}
	if strings.ContainsAny(cl.ReplicaID, "{}") {
		d.errorAt("cluster.replica_id", "%q must not contain { or }", cl.ReplicaID)
	}
	for _, k := range []struct{ path, v string }{{"cluster.listen", cl.Listen}, {"cluster.advertise", cl.Advertise}} {
		if k.v == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(k.v); err != nil || port == "" {
			d.errorAt(k.path, "invalid address %q: want host:port", k.v)
		}
	}
	for _, id := range d.order["cluster.peers"] {
		p := "cluster.peers." + id
		if strings.ContainsAny(id, "{}") {
			d.errorAt(p, "replica id %q must not contain { or }", id)
		}
		if _, _, err := net.SplitHostPort(cl.Peers[id]); err != nil {
			d.errorAt(p, "invalid address %q: want host:port", cl.Peers[id])
		}
	}
	r := cl.Redis
	if r == nil {
		return
	}
	if u, err := url.Parse(r.URL); r.URL == "" || err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
		// The URL may hold a password: never quoted.
		d.errorAt("cluster.redis.url", "want redis://host:port[/db], rediss://… or unix://…")
	}
	if r.PasswordEnv != "" && r.PasswordFile != "" {
		d.errorAt("cluster.redis.password_file", "give password_env or password_file, not both")
	}
}

// urlPassword is the password in a URL's userinfo, "" none.
func urlPassword(u string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.User == nil {
		return ""
	}
	p, _ := pu.User.Password()
	return p
}
