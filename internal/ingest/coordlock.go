package ingest

import (
	"context"
	"sync"
)

// coordLocks serialises, inside one process, the writes of one replaceable,
// addressable or read-state coordinate before they take a writer connection
// (docs/ARCHITECTURE.md "Writes of one coordinate"). The coordinate's
// advisory lock in PostgreSQL still orders the writes of different
// processes; this lock only keeps the writes queued behind it in this
// process from each holding a connection while they wait. The zero value is
// ready to use.
type coordLocks struct {
	mu   sync.Mutex
	keys map[int64]*coordLock
}

// coordLock is one held key: the writer holding it and the count of writers
// holding or waiting for it, so the entry leaves the map with the last one.
type coordLock struct {
	held  chan struct{} // one slot: full while a writer holds the key
	users int
}

// lock waits for key, or for ctx to end. The returned func releases it.
func (l *coordLocks) lock(ctx context.Context, key int64) (func(), error) {
	l.mu.Lock()
	if l.keys == nil {
		l.keys = map[int64]*coordLock{}
	}
	c := l.keys[key]
	if c == nil {
		c = &coordLock{held: make(chan struct{}, 1)}
		l.keys[key] = c
	}
	c.users++
	l.mu.Unlock()

	select {
	case c.held <- struct{}{}:
		return func() { <-c.held; l.leave(key, c) }, nil
	case <-ctx.Done():
		l.leave(key, c)
		return nil, ctx.Err()
	}
}

// leave drops one user of c, and c itself with the last.
func (l *coordLocks) leave(key int64, c *coordLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.users--; c.users == 0 {
		delete(l.keys, key)
	}
}

// coordinated is a change written under a coordinate's advisory lock:
// commit takes the same key in the process first.
type coordinated interface {
	coordinate() int64
}

func (c replaceChange) coordinate() int64 { return lockKey(c.key) }

func (c profileChange) coordinate() int64 { return c.replace.coordinate() }
