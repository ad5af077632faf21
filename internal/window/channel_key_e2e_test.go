package window_test

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// nip11Self returns the relay's NIP-11 self, "" when it has none.
func nip11Self(t *testing.T, r *relaytest.Relay) string {
	t.Helper()
	status, body := r.Do(t, relaytest.Request{Method: http.MethodGet, Path: "/", Header: map[string]string{"Accept": "application/nostr+json"}})
	require.Equal(t, http.StatusOK, status)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(body, &doc))
	self, _ := doc["self"].(string)
	return self
}

// TestOverlayKey is the 39005/39006 half of the overlay-key check: with
// BUZZ_RELAY_PRIVATE_KEY set, NIP-11 self is the pubkey of every overlay
// and their signatures verify with an independent library; without it
// NIP-11 has no self and the overlays still carry valid signatures.
func TestOverlayKey(t *testing.T) {
	t.Parallel()
	key := event.GenerateKey()
	for _, tc := range []struct {
		name string
		env  map[string]string
		self string
	}{
		{"KeySet", map[string]string{"BUZZ_RELAY_PRIVATE_KEY": hex.EncodeToString(key)}, event.PubKey(key)},
		{"KeyUnset", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRelay(t, tc.env)
			require.Equal(t, tc.self, nip11Self(t, b.r))
			if tc.self != "" {
				require.Equal(t, tc.self, b.self)
			}
			u := b.user(t)
			ch := u.channel(t)
			root := u.post(t, ch, eventtest.At(unixNow()-10))
			rep := u.reply(t, ch, root.ID, root.ID)
			evs := b.events(t, u.key, topLevel(ch, map[string]any{"include_summaries": true, "kinds": []int{9}}))
			require.Equal(t, []int{9, 39005, 39006}, kindsOf(evs))
			evs = append(evs, b.events(t, u.key, resolve(ch, rep.ID))...)
			require.Equal(t, []int{9, 39005, 39006, 39005}, kindsOf(evs))
			for _, ev := range evs[1:] {
				requireSigned(t, ev, b.self) // go-nostr: id and signature
			}
		})
	}
}
