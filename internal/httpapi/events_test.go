package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/httpapi"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestEvents(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	ctx := context.Background()

	t.Run("Accepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		received := b.total(t, "buzz_events_received_total")
		ev := b.key.Signed(t, 9, eventtest.Channel(b.general))
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":""}`, res.body)
		// One submission reached the pipeline, committed in the first
		// community, fanned out once on its channel.
		require.Equal(t, received+1, b.total(t, "buzz_events_received_total"))
		got := b.fan.of(ev.ID)
		require.Len(t, got, 1)
		require.Equal(t, b.ta.CommunityID, got[0].CommunityID)
		require.Equal(t, b.general, got[0].Channel)
		ref, err := store.New(d.pool).EventLookup(ctx, b.ta.CommunityID, ev.ID)
		require.NoError(t, err)
		require.Equal(t, b.key.PubKey, ref.PubKey)
		require.Equal(t, b.general, ref.Channel)
		_, err = store.New(d.pool).EventLookup(ctx, b.tb.CommunityID, ev.ID)
		require.ErrorIs(t, err, pg.ErrNotFound, "stored in the request's community only")
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.HTTPRequests.WithLabelValues("200", "/events")))
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.AuthAttempts.WithLabelValues("nip98")))

		res = b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":"duplicate:"}`, res.body)
		require.Len(t, b.fan.of(ev.ID), 1, "a duplicate is not fanned out again")

		// The pipeline sees the request's host: the channel created here
		// is counted under it.
		create := b.key.Signed(t, 9007, eventtest.Channel(uuid.NewString()), eventtest.Tag("name", "created"))
		res = b.signedPost(t, b.key, "/events", create.AppendJSON(nil))
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, `{"event_id":"`+create.ID+`","accepted":true,"message":""}`, res.body)
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.ChannelsCreated.WithLabelValues(b.ta.Host, "stream")))

		// The pipeline sees the HTTP source: kinds only a WebSocket may
		// carry are refused.
		wrap := b.key.Signed(t, 1059, eventtest.Tag("p", b.key.PubKey))
		res = b.signedPost(t, b.key, "/events", wrap.AppendJSON(nil))
		require.Equal(t, http.StatusBadRequest, res.status)
		require.Equal(t, errorJSON("invalid: kind 1059 is only accepted via WebSocket"), res.body)
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.EventsRejected.WithLabelValues("invalid", "http")))
	})

	t.Run("Conflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		msg := b.key.Signed(t, 9, eventtest.Channel(b.general))
		first := b.key.Signed(t, 7, eventtest.Tag("e", msg.ID), eventtest.Content("+"))
		b.submit(t, msg, first)
		ev := b.key.Signed(t, 7, eventtest.Channel(b.general), eventtest.Tag("e", msg.ID), eventtest.Content("+"))
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, `{"event_id":"`+ev.ID+`","accepted":false,"message":"duplicate: reaction already exists"}`, res.body)
		require.Empty(t, b.fan.of(ev.ID))
	})

	t.Run("Rejected", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		ev := b.key.Signed(t, 22242)
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusBadRequest, res.status)
		require.Equal(t, errorJSON("invalid: AUTH events cannot be submitted"), res.body)
	})

	t.Run("SignerIsNotAuthor", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		other := eventtest.NewKey()
		ev := other.Signed(t, 9, eventtest.Channel(b.general))
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusForbidden, res.status)
		require.Equal(t, errorJSON("invalid: event pubkey does not match authenticated identity"), res.body)
		require.Empty(t, b.fan.of(ev.ID))
	})

	t.Run("InternalFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		// The write transaction fails in PostgreSQL: this pipeline's
		// connections are read-only.
		pool, _ := d.readOnlyStore(t)
		ingestRO := b.newPipeline(pool)
		t.Cleanup(ingestRO.Close)
		b = b.serve(t, func(c *httpapi.Config) { c.Submitter = ingestRO })
		ev := b.key.Signed(t, 9, eventtest.Channel(b.general))
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusInternalServerError, res.status)
		require.Equal(t, `{"error":"internal server error"}`, res.body)
		require.Empty(t, b.fan.of(ev.ID))
		_, err := store.New(d.pool).EventLookup(ctx, b.ta.CommunityID, ev.ID)
		require.ErrorIs(t, err, pg.ErrNotFound, "nothing was stored")
	})

	t.Run("InvalidJSON", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		received := b.total(t, "buzz_events_received_total")
		for _, body := range []string{`not json`, `{"kind":9}`, `[]`} {
			res := b.signedPost(t, b.key, "/events", []byte(body))
			require.Equal(t, http.StatusBadRequest, res.status)
			require.Contains(t, res.body, `{"error":"invalid event JSON: `)
		}
		require.Equal(t, received, b.total(t, "buzz_events_received_total"), "nothing was submitted")
		require.Zero(t, b.fan.count())
	})

	t.Run("WrongMethod", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.do(t, http.MethodGet, b.ta.Host, "/events", nil, nil)
		require.Equal(t, http.StatusMethodNotAllowed, res.status)
		require.Equal(t, errorJSON("method not allowed"), res.body)
	})
}
