// Package sessionstore keeps, in Redis, what a replica adopting another's
// session needs beyond the sealed session id: who owns the session now,
// and the session state a client set (log level, resource
// subscriptions, a remote upstream's session id). A record is written
// when that state changes, never per call; it lives TTL after its last
// write or Touch. Ownership moves by compare-and-set (Claim), so when an
// owner dies and several replicas receive its sessions' requests at once,
// exactly one adopts each session.
//
// The record of session <id> is the hash <prefix>{<id>}:rec (the {id}
// hash tag puts it in the slot of the session's event streams).
package sessionstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Record is a session's shared state. The zero Record is a session with
// no owner and nothing set.
type Record struct {
	Owner    string // the replica serving the session; "" none yet
	LogLevel string // the level of the client's logging/setLevel; "" none sent
	// Subscriptions are the resource URIs of resources/subscribe, in order.
	Subscriptions []string
	// UpstreamSession is a remote upstream's Mcp-Session-Id, sent back as
	// a hint on adoption; "" none.
	UpstreamSession string
}

// Redis is what the store needs of a Redis client: *redis.Client,
// *redis.ClusterClient and every redis.UniversalClient have it.
type Redis interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	PExpire(ctx context.Context, key string, expiration time.Duration) *redis.BoolCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Store is the session records in one Redis; safe for concurrent use.
type Store struct {
	rdb    Redis
	prefix string
	ttl    time.Duration
}

// New returns the store of records under prefix ("" none) that live ttl
// (0: 30 minutes; at least a second) after their last write or Touch —
// the session idle timeout.
func New(rdb Redis, prefix string, ttl time.Duration) *Store {
	return &Store{rdb: rdb, prefix: prefix, ttl: max(cmp.Or(ttl, 30*time.Minute), time.Second)}
}

func (s *Store) key(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "{}") {
		return "", fmt.Errorf("sessionstore: bad session id %.40q", id)
	}
	return s.prefix + "{" + id + "}:rec", nil
}

// put replaces the record's fields and sets its TTL, atomically, unless
// another replica owns it (then it returns that owner).
var put = redis.NewScript(`
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= '' and owner ~= ARGV[1] then
  return owner
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'level', ARGV[2], 'subs', ARGV[3], 'upstream', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return ''
`)

// claim moves ownership to ARGV[2] if the owner is ARGV[1] (the one the
// claimer saw dead), or there is no owner, or it is ARGV[2] already.
var claim = redis.NewScript(`
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= '' and owner ~= ARGV[1] and owner ~= ARGV[2] then
  return owner
end
redis.call('HSET', KEYS[1], 'owner', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return ''
`)

// Put writes r as session id's record (on a change of its state). If
// another replica than r.Owner owns the session (it adopted it while
// this one was taken for dead), nothing is written and the error wraps
// ErrOwned: the caller has lost the session and must drop it.
func (s *Store) Put(ctx context.Context, id string, r Record) error {
	k, err := s.key(id)
	if err != nil {
		return err
	}
	subs, _ := json.Marshal(r.Subscriptions) // []string: cannot fail
	owner, err := put.Run(ctx, s.rdb, []string{k}, r.Owner, r.LogLevel, subs, r.UpstreamSession, s.ttl.Milliseconds()).Text()
	if err != nil {
		return fmt.Errorf("sessionstore: put: %w", err)
	}
	if owner != "" {
		return fmt.Errorf("%w (%s)", ErrOwned, owner)
	}
	return nil
}

// Get returns session id's record, and false when there is none (never
// written, expired or deleted).
func (s *Store) Get(ctx context.Context, id string) (Record, bool, error) {
	k, err := s.key(id)
	if err != nil {
		return Record{}, false, err
	}
	m, err := s.rdb.HGetAll(ctx, k).Result()
	if err != nil {
		return Record{}, false, fmt.Errorf("sessionstore: get: %w", err)
	}
	if len(m) == 0 {
		return Record{}, false, nil
	}
	r := Record{Owner: m["owner"], LogLevel: m["level"], UpstreamSession: m["upstream"]}
	if v := m["subs"]; v != "" && v != "null" {
		if err := json.Unmarshal([]byte(v), &r.Subscriptions); err != nil {
			return Record{}, false, fmt.Errorf("sessionstore: get: subscriptions: %w", err)
		}
	}
	return r, true, nil
}

// Touch restarts the record's TTL (a session in use); false when there is
// no record. Callers touch at most every TTL/4, not per call.
func (s *Store) Touch(ctx context.Context, id string) (bool, error) {
	k, err := s.key(id)
	if err != nil {
		return false, err
	}
	ok, err := s.rdb.PExpire(ctx, k, s.ttl).Result()
	if err != nil {
		return false, fmt.Errorf("sessionstore: touch: %w", err)
	}
	return ok, nil
}

// ErrOwned is Claim's error when another live replica owns the session.
var ErrOwned = errors.New("sessionstore: owned by another replica")

// Claim makes self the owner of session id, provided its owner is dead
// (the one the caller found without a heartbeat), absent, or self. Of
// several replicas claiming the same session from the same dead owner,
// exactly one succeeds; the others get an error wrapping ErrOwned that
// names the winner.
func (s *Store) Claim(ctx context.Context, id, dead, self string) error {
	k, err := s.key(id)
	if err != nil {
		return err
	}
	if self == "" {
		return errors.New("sessionstore: claim: no replica id")
	}
	owner, err := claim.Run(ctx, s.rdb, []string{k}, dead, self, s.ttl.Milliseconds()).Text()
	if err != nil {
		return fmt.Errorf("sessionstore: claim: %w", err)
	}
	if owner != "" {
		return fmt.Errorf("%w (%s)", ErrOwned, owner)
	}
	return nil
}

// Delete drops session id's record (the session ended).
func (s *Store) Delete(ctx context.Context, id string) error {
	k, err := s.key(id)
	if err != nil {
		return err
	}
	if err := s.rdb.Del(ctx, k).Err(); err != nil {
		return fmt.Errorf("sessionstore: delete: %w", err)
	}
	return nil
}

// TTL is how long a record lives after its last write or Touch.
func (s *Store) TTL() time.Duration { return s.ttl }
