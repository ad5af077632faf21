package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestCreatedAtFloor: with the writer pool armed (the relay's, with
// READ_DATABASE_URL), a channel event that passes the ±900 s drift check
// but reaches COMMIT more than 960 s after its created_at is refused with
// the drift text, on the one-statement path and in a transaction alike
// (docs/PROTOCOL.md §16.6). The pipeline's clock runs 150 s behind the database's,
// so an event 1000 s old by the database is 850 s old by the pipeline:
// 40 s past the floor, 50 s inside the drift check, margins a loaded
// machine does not eat.
func TestCreatedAtFloor(t *testing.T) {
	t.Parallel()
	_, url := dbtest.NewDB(t)
	armed, err := pg.Open(context.Background(), url, pg.PoolConfig{MaxConns: 4, CreatedAtFloor: 960 * time.Second})
	require.NoError(t, err)
	t.Cleanup(armed.Close)
	b := setup(t) // for its helpers; the pipeline under test runs on armed
	s := store.New(armed)
	c, err := s.CommunityEnsure(context.Background(), "floor.test")
	require.NoError(t, err)
	b.pool, b.store, b.tenant.CommunityID, b.tenant.Host = armed, s, c.ID, "floor.test"
	b.p = New(Config{Pool: armed, Live: b.fanout, RelayKey: b.relay.SK,
		NowFunc: func() time.Time { return time.Now().Add(-150 * time.Second) }})
	t.Cleanup(b.p.Close)
	owner := eventtest.NewKey()
	channel := b.channel(t, owner)
	old := func() eventtest.Option { return eventtest.At(time.Now().Unix() - 1000) }
	refused := Result{Code: Rejected, Message: "invalid: event timestamp too far from server time"}

	t.Run("TopLevelMessage", func(t *testing.T) {
		t.Parallel()
		ev := owner.Signed(t, event.KindStreamMessage, eventtest.Channel(channel), old())
		res := b.submit(t, owner, ev)
		require.Equal(t, refused, Result{Code: res.Code, Message: res.Message})
		_, stored := b.lookup(t, ev.ID)
		require.False(t, stored)
	})

	t.Run("ReplyInATransaction", func(t *testing.T) {
		t.Parallel()
		root := b.mustSubmit(t, owner, owner.Signed(t, event.KindStreamMessage, eventtest.Channel(channel)))
		ev := owner.Signed(t, event.KindStreamMessage, eventtest.Channel(channel), old(),
			eventtest.Tag("e", root.ID, "", "root"), eventtest.Tag("e", root.ID, "", "reply"))
		res := b.submit(t, owner, ev)
		require.Equal(t, refused, Result{Code: res.Code, Message: res.Message})
		_, stored := b.lookup(t, ev.ID)
		require.False(t, stored)
	})

	t.Run("ChannelLessAccepted", func(t *testing.T) {
		t.Parallel()
		b.mustSubmit(t, owner, owner.Signed(t, 1, old()))
	})
}
