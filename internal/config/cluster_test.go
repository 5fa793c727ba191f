package config

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func init() {
	expectedErrors = append(expectedErrors, []struct{ filename, errMsg string }{
		{"cluster_no_keys.bad.yaml", `:1: cluster.keys: required: at least one sealing secret`},
		{"cluster_key_short.bad.yaml", `:2: cluster.keys[0]: 9 bytes; a sealing secret must be at least 32 random bytes`},
		{"cluster_keys_both.bad.yaml", `:3: cluster.keys_file: give keys or keys_file, not both`},
		{"cluster_replica_id.bad.yaml", `:3: cluster.replica_id: "r{1}" must not contain { or }`},
		{"cluster_heartbeat_ttl.bad.yaml", `:3: cluster.heartbeat_ttl: 500ms is below 1s`},
		{"cluster_redis_url.bad.yaml", `:4: cluster.redis.url: want redis://host:port[/db]`},
		{"cluster_redis_password.bad.yaml", `:6: cluster.redis.password_file: give password_env or password_file, not both`},
		{"cluster_peer_addr.bad.yaml", `:4: cluster.peers.r1: invalid address "10.0.0.1": want host:port`},
		{"cluster_listen.bad.yaml", `:3: cluster.listen: invalid address "7946": want host:port`},
		{"cluster_unknown_key.bad.yaml", `cluster: unknown key "replicas"`},
		{"cluster_max_events.bad.yaml", `cluster.redis.events.max_events: must be positive`},
	}...)
}

// TestClusterBlock: the cluster block's defaults, its files resolved
// against the config's folder, its keys and the Redis password among the
// secret values (redacted from logs); no block, no Cluster.
func TestClusterBlock(t *testing.T) {
	t.Parallel()
	l := testLoader(map[string]string{"CLUSTER_KEY": "k3y-from-the-environment-0123456789abcdef"})
	dir := t.TempDir()
	c, err := l.parse([]byte(`
cluster:
  replica_id: r1
  keys: ["${CLUSTER_KEY}", "an-older-key-that-still-opens-0123456789"]
  peers: {r2: "10.0.0.2:7946"}
  redis:
    url: redis://:redis-password-1@127.0.0.1:6379/0
    tls: {ca_file: ca.pem}
`), filepath.Join(dir, "switchboard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Cluster
	if cl == nil || cl.Redis == nil {
		t.Fatalf("Cluster = %+v", cl)
	}
	if cl.SessionMaxAge != DefaultSessionMaxAge || cl.HeartbeatTTL != DefaultHeartbeatTTL || cl.Redis.KeyPrefix != DefaultKeyPrefix ||
		cl.Redis.Events != (ClusterEvents{MaxEvents: DefaultMaxEvents, MaxAge: DefaultEventsMaxAge}) {
		t.Errorf("defaults: %+v %+v", cl, cl.Redis)
	}
	if cl.Keys[0] != "k3y-from-the-environment-0123456789abcdef" || cl.Peers["r2"] != "10.0.0.2:7946" {
		t.Errorf("keys/peers: %q %v", cl.Keys, cl.Peers)
	}
	if want := filepath.Join(dir, "ca.pem"); cl.Redis.TLS.CAFile != want {
		t.Errorf("ca_file = %q, want %q", cl.Redis.TLS.CAFile, want)
	}
	sv := c.SecretValues()
	for _, s := range []string{cl.Keys[0], cl.Keys[1], "redis-password-1"} {
		if !slices.Contains(sv, s) {
			t.Errorf("%q is not among the secret values", s)
		}
	}
	c, err = l.parse([]byte("cluster:\n  keys_file: keys\n  session_max_age: 1h\n  heartbeat_ttl: 3s\n"), filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster.KeysFile != filepath.Join(dir, "keys") || c.Cluster.SessionMaxAge != time.Hour || c.Cluster.HeartbeatTTL != 3*time.Second || c.Cluster.Redis != nil {
		t.Errorf("keys_file block: %+v", c.Cluster)
	}
	c, err = l.parse([]byte("listen: 127.0.0.1:9\n"), filepath.Join(dir, "n.yaml"))
	if err != nil || c.Cluster != nil {
		t.Errorf("no cluster block: %v, %+v", err, c)
	}
}
