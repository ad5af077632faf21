package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

func TestTwoDoorsOneRoom(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	alice := eventtest.NewKey()

	t.Run("WebSocketThenQuery", func(t *testing.T) {
		w := r.Dial(t, "")
		w.Auth(alice)
		ev := alice.Signed(t, 1, eventtest.Content("from the socket"))
		w.MustPublish(ev)
		status, body := r.HTTP(t, "", http.MethodPost, "/query", &alice, []byte(`[{"ids":["`+ev.ID+`"]}]`))
		require.Equal(t, http.StatusOK, status, string(body))
		var got []event.Event
		require.NoError(t, json.Unmarshal(body, &got))
		require.Len(t, got, 1)
		require.Equal(t, ev.ID, got[0].ID)
	})
	t.Run("HTTPThenREQ", func(t *testing.T) {
		ev := alice.Signed(t, 1, eventtest.Content("from the bridge"))
		body, _ := json.Marshal(ev)
		status, resp := r.HTTP(t, "", http.MethodPost, "/events", &alice, body)
		require.Equal(t, http.StatusOK, status, string(resp))
		require.JSONEq(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":""}`, string(resp))
		w := r.Dial(t, "")
		w.Auth(alice)
		evs, closed, eose := w.Req("s", map[string]any{"ids": []string{ev.ID}})
		require.True(t, eose, closed)
		require.Len(t, evs, 1)
		require.Equal(t, ev, evs[0])
	})
}
