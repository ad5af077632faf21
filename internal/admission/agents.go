package admission

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Bounds of the agent cache.
const (
	// AgentCacheTTL is how long an answer of AgentFunc is kept: an owner
	// set or cleared in the database applies within it.
	AgentCacheTTL = 60 * time.Second
	// maxAgentEntries bounds the cache; past it, ended entries are swept
	// and, if none had ended, the cache is emptied.
	maxAgentEntries = 1 << 16
	// agentLookupTimeout bounds one AgentFunc call.
	agentLookupTimeout = 2 * time.Second
	// agentWarnEvery spaces the warnings of failed lookups.
	agentWarnEvery = time.Minute
)

type agentKey struct{ community, pubkey string }

type agentEntry struct {
	agent bool
	until time.Time
}

// agentCache remembers who is an agent. A failed lookup counts the pubkey
// as a human (the smaller budgets) and is not cached. Concurrent misses of
// one pubkey share one lookup: a key that opens many sockets or bridge
// calls at once costs one query, not one each.
type agentCache struct {
	lookup func(ctx context.Context, communityID, pubkey string) (bool, error)
	flight singleflight.Group

	mu      sync.Mutex
	entries map[agentKey]agentEntry
	warned  time.Time
}

func newAgentCache(lookup func(ctx context.Context, communityID, pubkey string) (bool, error)) *agentCache {
	return &agentCache{lookup: lookup, entries: make(map[agentKey]agentEntry)}
}

func (c *agentCache) isAgent(ctx context.Context, log *slog.Logger, communityID, pubkey string, now time.Time) bool {
	if c.lookup == nil {
		return false
	}
	k := agentKey{communityID, pubkey}
	c.mu.Lock()
	e, ok := c.entries[k]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.agent
	}
	v, err, _ := c.flight.Do(communityID+"/"+pubkey, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), agentLookupTimeout)
		defer cancel()
		return c.lookup(ctx, communityID, pubkey)
	})
	agent, _ := v.(bool)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if now.Sub(c.warned) >= agentWarnEvery {
			c.warned = now
			log.Warn("agent lookup failed; counted as a human", slog.String("err", err.Error()))
		}
		return false
	}
	if len(c.entries) >= maxAgentEntries {
		for key, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, key)
			}
		}
		if len(c.entries) >= maxAgentEntries {
			clear(c.entries)
		}
	}
	c.entries[k] = agentEntry{agent: agent, until: now.Add(AgentCacheTTL)}
	return agent
}
