package ingest

import (
	"sync"
	"time"
)

// The poster cache (docs/ARCHITECTURE.md "The channel check inside the
// write"). Steps 14 and 15 used to be a read of the channel's state before
// every channel event: one more statement and round trip on each
// publish's path. A pubkey that passed them recently is remembered here,
// and its next event that is written by the one-statement path skips the
// read: the write itself checks the same rule in its own snapshot
// (store.EventInsertParams.PosterCheck) and stores nothing when it fails.
// The cache is only a guess of who will pass; the write decides. So it
// needs no invalidation across processes: a member removed on another
// process is refused by the write of their next event, as before.
//
// A refusal by the write drops the entry, and the pipeline reads the
// channel's state to answer with the rule that refused it. A change of
// access committed by this process drops the entries it concerns at once.

// posterCacheTTL is how long a pass is remembered. It bounds how long a
// removed member's events keep running the family's own checks before the
// write refuses them, which is all a stale entry changes.
const posterCacheTTL = 30 * time.Second

// posterCacheMax is the most entries kept; a full cache starts again empty.
const posterCacheMax = 1 << 16

// posterKey is one pubkey in one channel of one community.
type posterKey struct{ community, channel, pubkey string }

// channelKey is one channel of one community.
type channelKey struct{ community, channel string }

// posterCache remembers who recently passed steps 14 and 15, by channel,
// so that a change of a whole channel's access forgets it in one step.
type posterCache struct {
	mu       sync.Mutex
	now      func() time.Time
	channels map[channelKey]map[string]time.Time // pubkey → the pass's expiry
	size     int                                 // passes held, all channels
}

func newPosterCache(now func() time.Time) *posterCache {
	return &posterCache{now: now, channels: make(map[channelKey]map[string]time.Time)}
}

// passed reports whether k passed recently.
func (c *posterCache) passed(k posterKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.channels[channelKey{k.community, k.channel}][k.pubkey]
	if ok && c.now().After(exp) {
		c.forget(channelKey{k.community, k.channel}, k.pubkey)
		return false
	}
	return ok
}

// pass remembers that k passed.
func (c *posterCache) pass(k posterKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size >= posterCacheMax {
		clear(c.channels)
		c.size = 0
	}
	ck := channelKey{k.community, k.channel}
	m := c.channels[ck]
	if m == nil {
		m = make(map[string]time.Time)
		c.channels[ck] = m
	}
	if _, ok := m[k.pubkey]; !ok {
		c.size++
	}
	m[k.pubkey] = c.now().Add(posterCacheTTL)
}

// dropChannel forgets every pass of one channel, or of one pubkey in it
// when pubkey is not "".
func (c *posterCache) dropChannel(community, channel, pubkey string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ck := channelKey{community, channel}
	if pubkey != "" {
		c.forget(ck, pubkey)
		return
	}
	c.size -= len(c.channels[ck])
	delete(c.channels, ck)
}

// forget removes one pass; c.mu is held.
func (c *posterCache) forget(ck channelKey, pubkey string) {
	m := c.channels[ck]
	if _, ok := m[pubkey]; !ok {
		return
	}
	delete(m, pubkey)
	c.size--
	if len(m) == 0 {
		delete(c.channels, ck)
	}
}
