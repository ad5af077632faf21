package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/ingest"
)

func TestEvents(t *testing.T) {
	t.Parallel()

	t.Run("Accepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ev := b.key.Signed(t, 9, eventtest.Channel("general"))
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":""}`, res.body)
		require.Len(t, b.store.submitted, 1)
		req := b.store.submitted[0]
		require.Equal(t, ingest.SourceHTTP, req.Source)
		require.Equal(t, b.key.PubKey, req.Author)
		require.Equal(t, "c-a", req.Tenant.CommunityID)
		require.Equal(t, "a.test", req.Tenant.Host)
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.HTTPRequests.WithLabelValues("200", "/events")))
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.AuthAttempts.WithLabelValues("nip98")))

		res = b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":"duplicate:"}`, res.body)
	})

	t.Run("Conflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.conflict = true
		ev := b.key.Signed(t, 7, eventtest.Channel("general"))
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, `{"event_id":"`+ev.ID+`","accepted":false,"message":"duplicate: reaction already exists"}`, res.body)
	})

	t.Run("Rejected", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ev := b.key.Signed(t, 22242)
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusBadRequest, res.status)
		require.Equal(t, errorJSON("invalid: AUTH events cannot be submitted"), res.body)
	})

	t.Run("SignerIsNotAuthor", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := eventtest.NewKey()
		ev := other.Signed(t, 9, eventtest.Channel("general"))
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusForbidden, res.status)
		require.Equal(t, errorJSON("invalid: event pubkey does not match authenticated identity"), res.body)
	})

	t.Run("InternalFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.fail = true
		ev := b.key.Signed(t, 9, eventtest.Channel("general"))
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusInternalServerError, res.status)
		require.Equal(t, `{"error":"internal server error"}`, res.body)
	})

	t.Run("InvalidJSON", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, body := range []string{`not json`, `{"kind":9}`, `[]`} {
			res := b.signedPost(t, b.key, "/events", []byte(body))
			require.Equal(t, http.StatusBadRequest, res.status)
			require.Contains(t, res.body, `{"error":"invalid event JSON: `)
		}
		require.Empty(t, b.store.submitted)
	})

	t.Run("WrongMethod", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodGet, "a.test", "/events", nil, nil)
		require.Equal(t, http.StatusMethodNotAllowed, res.status)
		require.Equal(t, errorJSON("method not allowed"), res.body)
	})
}
