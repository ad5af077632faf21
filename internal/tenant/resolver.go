package tenant

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"
)

// MsgNoCommunity is the 404 body of both doors for a host with no community.
const MsgNoCommunity = "relay: no community is configured for this host"

// ErrUnknownHost means no community is configured for a host, or the lookup
// failed: the doors answer both with the same 404. A LookupFunc returns it
// (or wraps it) for "not found"; only that answer is cached.
var ErrUnknownHost = errors.New(MsgNoCommunity)

// Cache lifetimes of docs/PROTOCOL.md §2.2.
const (
	DefaultHitTTL  = 60 * time.Second
	DefaultMissTTL = 5 * time.Second
	// maxEntries bounds the cache: a flood of random hosts cannot grow memory.
	maxEntries = 10_000
)

// LookupFunc returns the id of the community whose host or alias is the
// normalised host h, "" (or ErrUnknownHost) when there is none, or another
// error when the lookup itself failed. The relay's is
// store.CommunityIDByHost.
type LookupFunc func(ctx context.Context, h string) (communityID string, err error)

// Config configures a Resolver.
type Config struct {
	// LookupFunc reads the database. Required.
	LookupFunc LookupFunc
	// HitTTL is how long a found host is cached. Default DefaultHitTTL.
	HitTTL time.Duration
	// MissTTL is how long an unknown host is cached. Default DefaultMissTTL.
	MissTTL time.Duration
	// NowFunc returns the current time. Default time.Now.
	NowFunc func() time.Time
}

// Resolver resolves request hosts to tenants. It is safe for concurrent use.
type Resolver struct {
	cfg   Config
	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	tenant  Tenant
	found   bool
	expires time.Time
}

// NewResolver returns a Resolver. It panics without a LookupFunc, a
// wiring error that must fail at start.
func NewResolver(cfg Config) *Resolver {
	if cfg.LookupFunc == nil {
		panic("tenant: Config.LookupFunc is nil")
	}
	cfg.HitTTL = cmp.Or(cfg.HitTTL, DefaultHitTTL)
	cfg.MissTTL = cmp.Or(cfg.MissTTL, DefaultMissTTL)
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Resolver{cfg: cfg, cache: map[string]entry{}}
}

// Resolve is the tenant of a request: rawHost (a Host header or URL
// authority) is normalised and resolved. The tenant's Host is the
// normalised host the request used, an alias staying the alias. Any
// failure is ErrUnknownHost; a failed lookup is not cached, so the next
// request tries again.
func (r *Resolver) Resolve(ctx context.Context, rawHost string) (Tenant, error) {
	h := Normalize(rawHost)
	if h == "" {
		return Tenant{}, ErrUnknownHost
	}
	now := r.cfg.NowFunc()
	r.mu.Lock()
	e, ok := r.cache[h]
	r.mu.Unlock()
	if ok && now.Before(e.expires) {
		if !e.found {
			return Tenant{}, ErrUnknownHost
		}
		return e.tenant, nil
	}
	id, err := r.cfg.LookupFunc(ctx, h)
	switch {
	case errors.Is(err, ErrUnknownHost), err == nil && id == "":
		r.put(h, entry{expires: now.Add(r.cfg.MissTTL)})
		return Tenant{}, ErrUnknownHost
	case err != nil:
		return Tenant{}, ErrUnknownHost
	}
	t := Tenant{CommunityID: id, Host: h}
	r.put(h, entry{tenant: t, found: true, expires: now.Add(r.cfg.HitTTL)})
	return t, nil
}

// Forget drops every cached resolution, found or unknown, so the next
// request of every host reads the database: call it when communities or
// aliases were added (on another process, a hosts control message).
func (r *Resolver) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.cache)
}

func (r *Resolver) put(h string, e entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) > maxEntries {
		clear(r.cache)
	}
	r.cache[h] = e
}

// MemberChecker answers the relay-membership gate of both doors
// (docs/PROTOCOL.md §2.5). The composition root fills it with the store.
type MemberChecker interface {
	IsRelayMember(ctx context.Context, communityID, pubkey string) (bool, error)
}
