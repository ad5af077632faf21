package window_test

import (
	"context"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/window"
)

// channelWorld is an Engine on a database of its own, with rows written
// straight through the store (fixture): the shapes ingest never accepts
// (lookalike tags, rows that cannot be reconstructed, gated kinds in a
// channel) and volumes too large to publish one by one.
type channelWorld struct {
	pool   *pgxpool.Pool
	engine *window.Engine
	m      *metrics.Metrics
	cid    string
	ch     string
	author eventtest.Key
	reader eventtest.Key
	self   string
	// log holds the engine's log lines, JSON.
	log *logtest.Buffer
}

func newChannelWorld(t *testing.T) *channelWorld {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	key := event.GenerateKey()
	w := &channelWorld{pool: pool, m: metrics.New(prometheus.NewRegistry()), author: eventtest.NewKey(),
		reader: eventtest.NewKey(), self: event.PubKey(key), log: &logtest.Buffer{}}
	w.cid = fixture.Community(t, pool).ID
	w.ch = fixture.Channel(t, pool, w.cid, w.author)
	w.engine = window.New(window.Config{Pool: pool, Key: key, Metrics: w.m,
		Logger: slog.New(slog.NewJSONHandler(w.log, nil))})
	return w
}

// scope is the reader's scope with the given accessible channels (w.ch
// when none is named).
func (w *channelWorld) scope(channels ...string) window.Scope {
	if len(channels) == 0 {
		channels = []string{w.ch}
	}
	return window.Scope{CommunityID: w.cid, Reader: w.reader.PubKey, Accessible: func(ch string) bool {
		for _, c := range channels {
			if c == ch {
				return true
			}
		}
		return false
	}}
}

// at stores a kind 9 by the author in w.ch created at ts.
func (w *channelWorld) at(t *testing.T, ts int64, opts ...eventtest.Option) event.Event {
	t.Helper()
	return fixture.Event(t, w.pool, w.cid, w.author, event.KindStreamMessage,
		append([]eventtest.Option{eventtest.Channel(w.ch), eventtest.At(ts)}, opts...)...)
}

// window serves r and returns the items' events, requiring no error.
func (w *channelWorld) window(t *testing.T, sc window.Scope, r window.ChannelRequest) []event.Event {
	t.Helper()
	items, err := w.engine.Channel(context.Background(), sc, r)
	require.NoError(t, err)
	evs := make([]event.Event, len(items))
	for i, it := range items {
		evs[i] = it.Event
		require.Equal(t, string(it.Event.AppendJSON(nil)), string(it.JSON))
	}
	return evs
}

// exec runs one statement on the channelWorld's database.
func (w *channelWorld) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := w.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// rawRow inserts an events row as is, bypassing every check of the store:
// rows no client could have submitted.
func (w *channelWorld) rawRow(t *testing.T, ev event.Event, channel *string, tagsJSON string) {
	t.Helper()
	w.exec(t, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
		VALUES ($1, $2, $3, to_timestamp($4), $5, $6::jsonb, $7, $8, $9)`,
		w.cid, unhex(t, ev.ID), unhex(t, ev.PubKey), ev.CreatedAt, ev.Kind, tagsJSON, ev.Content, unhex(t, ev.Sig), channel)
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

func evIDs(evs []event.Event) []string {
	out := []string{}
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

// split returns the events of an answer before its bounds, and the
// bounds' content.
func split(t *testing.T, evs []event.Event) ([]event.Event, string) {
	t.Helper()
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1]
	require.Equal(t, 39006, last.Kind)
	return evs[:len(evs)-1], last.Content
}

func unixNow() int64 { return time.Now().Unix() }
