// Package cluster holds what the replicas of a Switchboard cluster share
// about each other: who is a member, at which address its cluster
// listener is reached, and whether it is alive. Members come from a
// static list or from heartbeats in Redis (SET with a TTL, refreshed
// every third of it), behind one small interface, so the forwarding and
// adoption code does not care which.
//
// NewRedis makes the client of the cluster's Redis. The sealed session
// ids (internal/sealed), the forwarding hop's MAC (cluster/hopauth), the
// session records (cluster/sessionstore), the shared event log
// (cluster/eventlog) and the shared rate limit (cluster/ratelimit) are
// the other foundations of cluster mode; docs/cluster.md tells how they
// fit together.
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replica is one member of the cluster.
type Replica struct {
	ID   string // the replica id (cluster.replica_id; the hostname by default)
	Addr string // host:port of its cluster listener
}

// Members lists the live replicas; its consumers (forwarding, adoption)
// own this interface.
type Members interface {
	// Members returns the replicas believed alive, sorted by ID.
	Members(ctx context.Context) ([]Replica, error)
}

// Static is a fixed membership: every listed replica counts as alive (a
// dead one shows when a forward to it fails). The zero Static has no
// members.
type Static []Replica

// Members returns the list, sorted by ID.
func (s Static) Members(context.Context) ([]Replica, error) {
	out := slices.Clone(s)
	slices.SortFunc(out, func(a, b Replica) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Redis is what heartbeats need of a Redis client: *redis.Client,
// *redis.ClusterClient and every redis.UniversalClient have it.
type Redis interface {
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
	SAdd(ctx context.Context, key string, members ...any) *redis.IntCmd
	SRem(ctx context.Context, key string, members ...any) *redis.IntCmd
	SMembers(ctx context.Context, key string) *redis.StringSliceCmd
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
	Expire(ctx context.Context, key string, expiration time.Duration) *redis.BoolCmd
}

// HeartbeatOptions configure a Heartbeat.
type HeartbeatOptions struct {
	// Prefix starts every key ("switchboard:"); "" means none.
	Prefix string
	// Self is this replica; its ID must be set and free of braces.
	Self Replica
	// TTL is how long a beat keeps the replica alive; 0 means 15 s. It
	// beats every TTL/3, so a replica is taken for dead between TTL*2/3
	// and TTL after its last beat. At least a second.
	TTL time.Duration
}

// Heartbeat is the Redis membership: each replica's key
// <prefix>{members}:<id> holds its address and expires TTL after its
// last beat; the set <prefix>{members} indexes the ids (the {members}
// hash tag keeps them in one Redis Cluster slot, so one MGET reads
// them all). Safe for concurrent use.
type Heartbeat struct {
	rdb  Redis
	self Replica
	ttl  time.Duration
	set  string // the index
	key  string // this replica's key

	beaten chan<- struct{} // tests: told after each beat of Run; nil: none
}

// NewHeartbeat returns the membership of the replicas beating into rdb.
func NewHeartbeat(rdb Redis, opts HeartbeatOptions) (*Heartbeat, error) {
	if opts.Self.ID == "" || strings.ContainsAny(opts.Self.ID, "{}") {
		return nil, fmt.Errorf("cluster: bad replica id %q", opts.Self.ID)
	}
	ttl := cmp.Or(opts.TTL, 15*time.Second)
	if ttl < time.Second {
		return nil, fmt.Errorf("cluster: heartbeat TTL %v is under a second", ttl)
	}
	set := opts.Prefix + "{members}"
	return &Heartbeat{rdb: rdb, self: opts.Self, ttl: ttl, set: set, key: set + ":" + opts.Self.ID}, nil
}

// Beat marks this replica alive for TTL.
func (h *Heartbeat) Beat(ctx context.Context) error {
	if err := h.rdb.Set(ctx, h.key, h.self.Addr, h.ttl).Err(); err != nil {
		return fmt.Errorf("cluster: heartbeat: %w", err)
	}
	if err := h.rdb.SAdd(ctx, h.set, h.self.ID).Err(); err != nil {
		return fmt.Errorf("cluster: heartbeat: %w", err)
	}
	// The index lives as long as its newest member; a dead cluster's goes.
	_ = h.rdb.Expire(ctx, h.set, 2*h.ttl).Err()
	return nil
}

// Run beats at once and then every TTL/3 until ctx ends, then removes
// this replica (a drained replica leaves at once rather than at its
// TTL). A failed beat is reported to onError (nil: ignored) and retried
// at the next tick. It returns when ctx ends; the caller's goroutine owns
// it.
func (h *Heartbeat) Run(ctx context.Context, onError func(error)) {
	tick := time.NewTicker(h.ttl / 3)
	defer tick.Stop()
	for {
		if err := h.Beat(ctx); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
		if h.beaten != nil {
			h.beaten <- struct{}{}
		}
		select {
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = h.Leave(leave)
			return
		case <-tick.C:
		}
	}
}

// Leave removes this replica from the membership now.
func (h *Heartbeat) Leave(ctx context.Context) error {
	err := h.rdb.Del(ctx, h.key).Err()
	return errors.Join(err, h.rdb.SRem(ctx, h.set, h.self.ID).Err())
}

// Members returns the replicas whose last beat has not expired, sorted by
// ID, and drops the expired ones from the index.
func (h *Heartbeat) Members(ctx context.Context) ([]Replica, error) {
	ids, err := h.rdb.SMembers(ctx, h.set).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster: members: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = h.set + ":" + id
	}
	addrs, err := h.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster: members: %w", err)
	}
	var out []Replica
	var gone []any
	for i, a := range addrs {
		if s, ok := a.(string); ok {
			out = append(out, Replica{ID: ids[i], Addr: s})
		} else {
			gone = append(gone, ids[i])
		}
	}
	if len(gone) > 0 {
		_ = h.rdb.SRem(ctx, h.set, gone...).Err() // a late beat re-adds itself
	}
	return out, nil
}
