package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/switchboard-mcp/switchboard/internal/cluster"
	"github.com/switchboard-mcp/switchboard/internal/cluster/eventlog"
	"github.com/switchboard-mcp/switchboard/internal/cluster/ratelimit"
	"github.com/switchboard-mcp/switchboard/internal/cluster/replica"
	"github.com/switchboard-mcp/switchboard/internal/cluster/sessionstore"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/edge"
	"github.com/switchboard-mcp/switchboard/internal/front/streamable"
	"github.com/switchboard-mcp/switchboard/internal/policy"
)

// clusterParts are what a cluster block makes (docs/cluster.md); the
// zero value is a single replica.
type clusterParts struct {
	replica   *replica.Replica      // nil without a cluster block
	limits    *sharedLimit          // nil without cluster.redis
	rdb       redis.UniversalClient // nil without cluster.redis
	heartbeat *cluster.Heartbeat    // nil without cluster.redis
	// events keep the listen streams' events for Last-Event-ID: in
	// Redis with cluster.redis (any replica resumes a stream), else in
	// this process's memory (never nil).
	events streamable.EventLog
}

// Bounds of the in-memory event log (no cluster.redis): per listen
// stream, the last memEvents events, for memEventsAge after its last one.
const (
	memEvents    = 256
	memEventsAge = 15 * time.Minute
)

// newCluster builds the parts of cfg's cluster block; without one, the
// parts of a single replica (an in-memory event log only). drain is
// closed when the replica begins to drain. Its errors never show a secret.
func newCluster(cfg *config.Config, log *slog.Logger, drain <-chan struct{}) (clusterParts, error) {
	cc := cfg.Cluster
	mem := eventlog.NewMemory(eventlog.Options{MaxLen: memEvents, MaxAge: memEventsAge})
	if cc == nil {
		return clusterParts{events: mem}, nil
	}
	secrets, err := clusterSecrets(cc)
	if err != nil {
		return clusterParts{}, err
	}
	self := cluster.Replica{ID: cc.ReplicaID, Addr: cc.Advertise}
	if self.ID == "" {
		if self.ID, err = os.Hostname(); err != nil {
			return clusterParts{}, fmt.Errorf("cluster.replica_id: empty, and no host name: %w", err)
		}
	}
	if self.Addr == "" {
		listen := cc.Listen
		if listen == "" {
			listen = cfg.Listen
		}
		_, port, _ := net.SplitHostPort(listen)
		host, err := os.Hostname()
		if err != nil {
			return clusterParts{}, fmt.Errorf("cluster.advertise: empty, and no host name: %w", err)
		}
		self.Addr = net.JoinHostPort(host, port)
	}
	p := clusterParts{events: mem}
	opts := replica.Options{Self: self, Secrets: secrets, MaxAge: cc.SessionMaxAge, MaxBody: cfg.MaxBodyBytes, Logger: log, Drain: drain}
	if rc := cc.Redis; rc != nil {
		p.rdb, err = cluster.NewRedis(cluster.RedisOptions{URL: rc.URL, PasswordEnv: rc.PasswordEnv, PasswordFile: rc.PasswordFile,
			TLS: cluster.TLSFiles{CAFile: rc.TLS.CAFile, CertFile: rc.TLS.CertFile, KeyFile: rc.TLS.KeyFile, ServerName: rc.TLS.ServerName}})
		if err != nil {
			return clusterParts{}, fmt.Errorf("cluster.redis: %w", err)
		}
		p.heartbeat, err = cluster.NewHeartbeat(p.rdb, cluster.HeartbeatOptions{Prefix: rc.KeyPrefix, Self: self, TTL: cc.HeartbeatTTL})
		if err != nil {
			_ = p.rdb.Close()
			return clusterParts{}, err
		}
		opts.Members = p.heartbeat
		idle := cfg.SessionIdleTimeout
		if idle == 0 {
			idle = cc.SessionMaxAge
		}
		opts.Store = sessionstore.New(p.rdb, rc.KeyPrefix, idle)
		p.limits = &sharedLimit{rl: ratelimit.New(p.rdb, rc.KeyPrefix), log: log}
		p.events = eventlog.New(p.rdb, eventlog.Options{Prefix: rc.KeyPrefix, MaxLen: rc.Events.MaxEvents, MaxAge: rc.Events.MaxAge})
	} else {
		members := cluster.Static{self}
		for _, id := range slices.Sorted(maps.Keys(cc.Peers)) {
			if id != self.ID {
				members = append(members, cluster.Replica{ID: id, Addr: cc.Peers[id]})
			}
		}
		opts.Members = members
	}
	if p.replica, err = replica.New(opts); err != nil {
		if p.rdb != nil {
			_ = p.rdb.Close()
		}
		return clusterParts{}, err
	}
	return p, nil
}

// clusterSecrets are the sealing secrets of cc: its keys, or the lines of
// its keys_file.
func clusterSecrets(cc *config.Cluster) ([][]byte, error) {
	var out [][]byte
	for _, k := range cc.Keys {
		out = append(out, []byte(k))
	}
	if cc.KeysFile == "" {
		return out, nil
	}
	b, err := os.ReadFile(cc.KeysFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.keys_file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			if len(line) < config.MinClusterKey {
				return nil, fmt.Errorf("cluster.keys_file: line %d is %d bytes; a sealing secret must be at least %d", len(out)+1, len(line), config.MinClusterKey)
			}
			out = append(out, bytes.Clone(line))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster.keys_file: %s holds no secret", cc.KeysFile)
	}
	return out, nil
}

// edgeCluster is the cluster the edge forwards through; nil (an untyped
// nil interface) for a single replica.
func (p clusterParts) edgeCluster() edge.Cluster {
	if p.replica == nil {
		return nil
	}
	return p.replica
}

// frontCluster is the cluster the Streamable HTTP fronts mint and adopt
// sessions with; nil for a single replica.
func (p clusterParts) frontCluster() streamable.Cluster {
	if p.replica == nil {
		return nil
	}
	return p.replica
}

// runHeartbeat beats this replica into the membership until ctx ends, then
// leaves it; nothing without Redis. The caller's goroutine owns it.
func (g *Gateway) runHeartbeat(ctx context.Context) {
	hb := g.cluster.heartbeat
	if hb == nil {
		return
	}
	var last time.Time
	hb.Run(ctx, func(err error) {
		if time.Since(last) > time.Minute { // one warning a minute while Redis is down
			last = time.Now()
			g.log.Warn("cluster: heartbeat failed; the other replicas take this one for dead after heartbeat_ttl", "err", err)
		}
	})
}

// close closes the hop connections and the Redis client.
func (p clusterParts) close() {
	if p.replica != nil {
		p.replica.Close()
	}
	if p.rdb != nil {
		_ = p.rdb.Close()
	}
}

// sharedLimit is the clients' rate limits in the cluster's Redis
// (policy.SharedLimiter): one budget for all replicas.
type sharedLimit struct {
	rl  *ratelimit.Limiter
	log *slog.Logger
	// down is set while Redis fails, so that the fallback to each
	// replica's own buckets is logged once per outage.
	down atomic.Bool
}

// Allow asks Redis, within a second.
func (s *sharedLimit) Allow(key string, r policy.Rate) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d, err := s.rl.Allow(ctx, "client:"+key, ratelimit.Limit{Rate: r.Rate, Burst: r.Burst})
	if err != nil {
		if !s.down.Swap(true) {
			s.log.Warn("cluster: the shared rate limits are unavailable; each replica applies the limits alone until Redis answers", "err", err)
		}
		return false, 0, err
	}
	if s.down.Swap(false) {
		s.log.Info("cluster: the shared rate limits are back")
	}
	return d.Allowed, d.RetryAfter, nil
}

// Drain bounds of a cluster replica (drain).
const (
	// drainQuiet is how long no request may have begun before a draining
	// replica stops: the load balancer has seen /readyz answer 503 and
	// sends elsewhere.
	drainQuiet = time.Second
	// drainMax bounds the whole drain.
	drainMax = 20 * time.Second
)

// drain, for a cluster replica (nothing without one), answers /readyz
// 503 and ends the listen streams (their clients reconnect through the
// load balancer, to another replica, which adopts the sessions), then
// serves until no request is in progress and none began for drainQuiet,
// at most drainMax: calls in flight finish here and none is refused.
// The replica has already left the membership.
func (g *Gateway) drain() {
	if g.draining == nil {
		return
	}
	close(g.draining)
	g.log.Info("cluster: draining: /readyz answers 503; serving the requests still coming")
	deadline := time.Now().Add(drainMax)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !g.edge.Idle(drainQuiet) && time.Now().Before(deadline) {
		<-tick.C
	}
}
