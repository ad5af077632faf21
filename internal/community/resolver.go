// Package community binds requests to tenants: it resolves a request's Host
// to a community through the store, with the per-process cache of spec 10
// §2.2 (hits 60 s, misses 5 s).
//
// It owns host → community resolution. It does NOT normalise hosts beyond
// calling host.Normalize, and does NOT create communities (the CLI and the
// startup bootstrap do, through the store).
package community

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/host"
	"github.com/buzz-relay/buzz/internal/store"
)

// ErrUnmapped means no community is configured for a host (or the lookup
// failed: callers answer both with the same 404).
var ErrUnmapped = errors.New("relay: no community is configured for this host")

// Resolver resolves hosts to tenants. It is safe for concurrent use.
type Resolver struct {
	store   *store.Store
	hitTTL  time.Duration
	missTTL time.Duration
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	tenant  host.Tenant
	found   bool
	expires time.Time
}

// NewResolver returns a Resolver with the spec's cache lifetimes.
func NewResolver(s *store.Store) *Resolver {
	return &Resolver{store: s, hitTTL: 60 * time.Second, missTTL: 5 * time.Second, now: time.Now, cache: map[string]entry{}}
}

// Resolve maps a raw Host header to its tenant. Any failure is ErrUnmapped.
func (r *Resolver) Resolve(ctx context.Context, rawHost string) (host.Tenant, error) {
	h := host.Normalize(rawHost)
	if h == "" {
		return host.Tenant{}, ErrUnmapped
	}
	now := r.now()
	r.mu.Lock()
	e, ok := r.cache[h]
	r.mu.Unlock()
	if ok && now.Before(e.expires) {
		if !e.found {
			return host.Tenant{}, ErrUnmapped
		}
		return e.tenant, nil
	}
	c, err := r.store.CommunityByHost(ctx, h)
	if err != nil {
		// Lookup errors are not cached: the next request tries again.
		if !isNotFound(err) {
			return host.Tenant{}, ErrUnmapped
		}
		r.put(h, entry{found: false, expires: now.Add(r.missTTL)})
		return host.Tenant{}, ErrUnmapped
	}
	t := host.Tenant{CommunityID: c.ID, Host: h}
	r.put(h, entry{tenant: t, found: true, expires: now.Add(r.hitTTL)})
	return t, nil
}

func (r *Resolver) put(h string, e entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) > 10_000 {
		clear(r.cache) // bounded: a flood of random hosts cannot grow memory
	}
	r.cache[h] = e
}
