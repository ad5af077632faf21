package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestEventCountCandidates: the COUNT fallback's candidates are the rows
// EventQuery returns, up to the limit, with everything the post-filter
// reads and neither content nor signature.
func TestEventCountCandidates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	w := newQueryWorld(t, b)
	p := store.EventQueryParams{CommunityID: w.cid, Reader: w.alice.PubKey, Filter: &event.Filter{Kinds: []int{1}},
		Channels: []string{w.open}, Limit: 100}
	full, err := b.s.EventQuery(ctx, p)
	require.NoError(t, err)
	got, err := b.s.EventCountCandidates(ctx, p)
	require.NoError(t, err)
	require.ElementsMatch(t, ids(full), ids(got))
	byID := map[string]store.StoredEvent{}
	for _, se := range full {
		byID[se.Event.ID] = se
	}
	for _, se := range got {
		want := byID[se.Event.ID]
		require.Empty(t, se.Event.Content)
		require.Empty(t, se.Event.Sig)
		require.Equal(t, want.Event.PubKey, se.Event.PubKey)
		require.Equal(t, want.Event.CreatedAt, se.Event.CreatedAt)
		require.Equal(t, want.Event.Kind, se.Event.Kind)
		require.Equal(t, want.Event.Tags, se.Event.Tags)
		require.Equal(t, want.Channel, se.Channel)
	}

	t.Run("AtTheLimitAndOneUnder", func(t *testing.T) {
		t.Parallel()
		n := len(full)
		require.GreaterOrEqual(t, n, 2)
		p := p
		p.Limit = n
		got, err := b.s.EventCountCandidates(ctx, p)
		require.NoError(t, err)
		require.Len(t, got, n)
		p.Limit = n - 1
		got, err = b.s.EventCountCandidates(ctx, p)
		require.NoError(t, err)
		require.Len(t, got, n-1)
	})
}

// TestReadAcquireTimeout: a Store from NewReader fails a read-door
// statement with pg.ErrAcquireTimeout once the pool has had no free
// connection for that long, and serves it as soon as one is free.
func TestReadAcquireTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := dbtest.NewDB(t)
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const wait = 100 * time.Millisecond
	s := store.NewReader(pool, wait)
	cid := fixture.Community(t, pool).ID
	p := store.EventQueryParams{CommunityID: cid, Filter: &event.Filter{Kinds: []int{1}}, Limit: 10}

	held, err := pool.Acquire(ctx) // the only connection
	require.NoError(t, err)
	start := time.Now()
	for name, read := range map[string]func() error{
		"EventRows":            func() error { _, err := s.EventRows(ctx, p); return err },
		"EventCount":           func() error { _, err := s.EventCount(ctx, p); return err },
		"EventCountCandidates": func() error { _, err := s.EventCountCandidates(ctx, p); return err },
		"AccessibleChannels":   func() error { _, err := s.AccessibleChannels(ctx, cid, "00"); return err },
		"ChannelsAccessible": func() error {
			_, err := s.ChannelsAccessible(ctx, cid, "00", []string{"00000000-0000-0000-0000-000000000001"})
			return err
		},
		"ThreadReplies": func() error {
			_, err := s.ThreadReplies(ctx, store.ThreadRepliesParams{CommunityID: cid, Root: strings.Repeat("0", 64), MaxDepth: 1, Limit: 1})
			return err
		},
		"NIP98Use": func() error { _, err := s.NIP98Use(ctx, cid, strings.Repeat("0", 64)); return err },
	} {
		err := read()
		require.ErrorIs(t, err, pg.ErrAcquireTimeout, name)
		require.True(t, store.IsAcquireTimeout(err), name)
	}
	require.GreaterOrEqual(t, time.Since(start), 7*wait)
	held.Release()
	n, err := s.EventCount(ctx, p)
	require.NoError(t, err)
	require.Zero(t, n)
}
