package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// windowRelay starts a relay with one authenticated owner, its
// WebSocket, and an open channel it created (named name): the setting of
// the tests around the NIP-CW windows.
func windowRelay(t *testing.T, name string) (*relaytest.Relay, eventtest.Key, *relaytest.WS, string) {
	t.Helper()
	r := relaytest.Start(t, nil)
	owner := eventtest.NewKey()
	w := r.Dial(t, "")
	w.Auth(owner)
	ch := uuid.NewString()
	w.MustPublish(owner.Signed(t, event.KindCreateGroup, eventtest.Tag("h", ch), eventtest.Tag("name", name)))
	return r, owner, w, ch
}

// queryEvents posts body to /query as key and returns the events of the
// 200 answer, in order.
func queryEvents(t *testing.T, r *relaytest.Relay, key eventtest.Key, body string) []event.Event {
	t.Helper()
	status, resp := r.HTTP(t, "", http.MethodPost, "/query", &key, []byte(body))
	require.Equal(t, http.StatusOK, status, string(resp))
	var evs []event.Event
	require.NoError(t, json.Unmarshal(resp, &evs))
	return evs
}
