package window_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// testBundle is a whole relay on its own database and the identity its
// overlays must carry.
type testBundle struct {
	r   *relaytest.Relay
	cid string
	// self is the pubkey every overlay must be signed by: NIP-11 self when
	// the relay advertises one, else the key the relay booted with.
	self string
}

// setupRelay starts a relay with env; with BUZZ_RELAY_PRIVATE_KEY set, its
// NIP-11 self is the overlays' signer.
func setupRelay(t *testing.T, env map[string]string) *testBundle {
	t.Helper()
	// The test's WebSocket answers pings only while it reads: no ping
	// during a test, so a slow machine does not close it mid-fixture.
	vars := map[string]string{"TEST_HEARTBEAT": "1h"}
	maps.Copy(vars, env)
	r := relaytest.Start(t, vars)
	c, err := r.App.Store().CommunityByHost(context.Background(), r.Host)
	require.NoError(t, err)
	return &testBundle{r: r, cid: c.ID, self: event.PubKey(r.App.RelayKey())}
}

// user is an authenticated WebSocket client of the deployment community.
type user struct {
	key eventtest.Key
	w   *relaytest.WS
}

func (b *testBundle) user(t *testing.T) user {
	t.Helper()
	k := eventtest.NewKey()
	w := b.r.Dial(t, "")
	w.Auth(k)
	return user{key: k, w: w}
}

// channel creates a channel owned by u (9007) and returns its id; opts add
// tags (visibility, …).
func (u user) channel(t *testing.T, opts ...eventtest.Option) string {
	t.Helper()
	id := uuid.NewString()
	base := []eventtest.Option{eventtest.Content("n-" + uuid.NewString()[:8]), eventtest.Channel(id), eventtest.Tag("name", "c-"+id[:8])}
	u.w.MustPublish(u.key.Signed(t, event.KindCreateGroup, append(base, opts...)...))
	return id
}

// post publishes a kind 9 in ch and returns it.
func (u user) post(t *testing.T, ch string, opts ...eventtest.Option) event.Event {
	t.Helper()
	ev := u.key.Signed(t, event.KindStreamMessage, append([]eventtest.Option{eventtest.Channel(ch),
		eventtest.Content("m-" + uuid.NewString()[:8])}, opts...)...)
	u.w.MustPublish(ev)
	return ev
}

// reply publishes a kind 9 reply to parent under root with NIP-10 marked
// tags.
func (u user) reply(t *testing.T, ch, root, parent string, opts ...eventtest.Option) event.Event {
	t.Helper()
	base := []eventtest.Option{eventtest.Tag("e", root, "", "root"), eventtest.Tag("e", parent, "", "reply")}
	return u.post(t, ch, append(base, opts...)...)
}

// publish signs and publishes an event of kind by u.
func (u user) publish(t *testing.T, kind int, opts ...eventtest.Option) event.Event {
	t.Helper()
	ev := u.key.Signed(t, kind, opts...)
	u.w.MustPublish(ev)
	return ev
}

// delete publishes u's kind 5 of id.
func (u user) delete(t *testing.T, id string) event.Event {
	t.Helper()
	return u.publish(t, event.KindDeletion, eventtest.Content(""), eventtest.Tag("e", id))
}

// query posts filters to /query as key and returns the status and body.
func (b *testBundle) query(t *testing.T, key eventtest.Key, filters ...any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(filters)
	require.NoError(t, err)
	return b.r.HTTP(t, "", http.MethodPost, "/query", &key, body)
}

// events posts filters to /query as key, requires 200 and returns the
// events as an independent Nostr library decodes them; every overlay
// among them must be signed by the relay key with a valid signature.
func (b *testBundle) events(t *testing.T, key eventtest.Key, filters ...any) []nostr.Event {
	t.Helper()
	status, body := b.query(t, key, filters...)
	require.Equal(t, http.StatusOK, status, string(body))
	var evs []nostr.Event
	require.NoError(t, json.Unmarshal(body, &evs))
	for _, ev := range evs {
		if ev.Kind == 39005 || ev.Kind == 39006 {
			requireSigned(t, ev, b.self)
		}
	}
	return evs
}

// requireSigned checks an overlay with go-nostr: its id, its signature,
// and that signer is its pubkey.
func requireSigned(t *testing.T, ev nostr.Event, signer string) {
	t.Helper()
	require.Equal(t, signer, ev.PubKey, "overlay kind %d signer", ev.Kind)
	require.True(t, ev.CheckID(), "overlay kind %d id", ev.Kind)
	ok, err := ev.CheckSignature()
	require.NoError(t, err)
	require.True(t, ok, "overlay kind %d signature", ev.Kind)
}

// bounds is a decoded 39006.
type bounds struct {
	D          string
	HasMore    bool `json:"has_more"`
	NextCursor *struct {
		CreatedAt int64  `json:"created_at"`
		ID        string `json:"id"`
	} `json:"next_cursor"`
}

// page splits a window answer into the events before its bounds and the
// bounds, which must be the last event and the only 39006, with exactly
// the tags d and h of ch, and consistent.
func windowPage(t *testing.T, evs []nostr.Event, ch string) ([]nostr.Event, bounds) {
	t.Helper()
	require.NotEmpty(t, evs, "a served window has its bounds")
	last := evs[len(evs)-1]
	require.Equal(t, 39006, last.Kind)
	for _, ev := range evs[:len(evs)-1] {
		require.NotEqual(t, 39006, ev.Kind, "exactly one bounds event")
	}
	require.Len(t, last.Tags, 2)
	require.Equal(t, "d", last.Tags[0][0])
	require.Len(t, last.Tags[0], 2)
	require.Equal(t, nostr.Tag{"h", ch}, last.Tags[1])
	var bd bounds
	require.NoError(t, json.Unmarshal([]byte(last.Content), &bd))
	bd.D = last.Tags[0][1]
	require.Equal(t, bd.HasMore, bd.NextCursor != nil, "has_more and next_cursor agree")
	return evs[:len(evs)-1], bd
}

// ids returns the events' ids.
func nostrIDs(evs []nostr.Event) []string {
	out := []string{}
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

// window is a channel-mode filter of ch for kind 9 rows (a filter
// without kinds meets the generic p-gate); extra adds or overrides fields.
func topLevel(ch string, extra map[string]any) map[string]any {
	f := map[string]any{"top_level": true, "#h": []string{ch}, "kinds": []int{9}}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

// kindsOf returns the events' kinds.
func kindsOf(evs []nostr.Event) []int {
	out := []int{}
	for _, ev := range evs {
		out = append(out, ev.Kind)
	}
	return out
}
