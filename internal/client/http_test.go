package client

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestNIP98Header checks the header byte for byte; TestHTTP shows the relay
// accepts it (a bad token is a 401 there).
func TestNIP98Header(t *testing.T) {
	t.Parallel()
	sk := event.GenerateKey()
	body := []byte(`[{"kinds":[9]}]`)
	before := time.Now().Unix()
	h, err := NIP98Header(sk, "post", "http://localhost:3000/query", body)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "Nostr "))
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "Nostr "))
	require.NoError(t, err)
	ev, err := event.Parse(raw)
	require.NoError(t, err)
	require.True(t, ev.VerifySignature())
	require.Equal(t, event.KindNIP98, ev.Kind)
	require.Equal(t, event.PubKey(sk), ev.PubKey)
	require.GreaterOrEqual(t, ev.CreatedAt, before)
	require.LessOrEqual(t, ev.CreatedAt, time.Now().Unix())
	require.Equal(t, "http://localhost:3000/query", ev.Tags.First("u").Value())
	require.Equal(t, "POST", ev.Tags.First("method").Value())
	sum := sha256.Sum256(body)
	require.Equal(t, hex.EncodeToString(sum[:]), ev.Tags.First("payload").Value())

	// No body, no payload tag; each header is a fresh event.
	h2, err := NIP98Header(sk, http.MethodGet, "http://localhost:3000/", nil)
	require.NoError(t, err)
	raw, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(h2, "Nostr "))
	require.NoError(t, err)
	ev2, err := event.Parse(raw)
	require.NoError(t, err)
	require.Nil(t, ev2.Tags.First("payload"))
	require.NotEqual(t, ev.ID, ev2.ID)
}

// setupHTTP starts a relay and returns a bridge client for its deployment
// host signing as a fresh key.
func setupHTTP(t *testing.T) (*HTTP, *relaytest.Relay) {
	t.Helper()
	r := relaytest.Start(t, nil)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &HTTP{BaseURL: "http://" + r.Host, SK: event.GenerateKey(), Client: &http.Client{Transport: tr}}, r
}

func TestHTTP(t *testing.T) {
	t.Parallel()

	t.Run("PublishAccepted", func(t *testing.T) {
		t.Parallel()
		h, r := setupHTTP(t)
		ev := signed(t, h.SK, "over http")
		// The relay checks every request's NIP-98 token (u, method, payload,
		// signature, single use): an accepted event proves the header.
		ok, msg, err := h.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok, msg)
		require.Empty(t, msg)
		// The same event again, through 127.0.0.1 (the same tenant): a
		// header for the same URL, body and second would be the same token
		// event, which the relay refuses as a replay.
		again := *h
		again.BaseURL = "http://127.0.0.1:" + strconv.Itoa(r.Port)
		ok, msg, err = again.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "duplicate:", msg)
		got, err := h.Query(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Equal(t, []event.Event{ev}, got)
	})

	t.Run("TokenSignedAhead", func(t *testing.T) {
		t.Parallel()
		h, r := setupHTTP(t)
		// Through 127.0.0.1 with Host: the token names the community's host.
		h.BaseURL, h.Host = "http://127.0.0.1:"+strconv.Itoa(r.Port), r.Host
		f := event.Filter{Kinds: []int{1}}
		body := FiltersJSON([]event.Filter{f})
		ahead, err := h.Token("/count", body, time.Now().Add(45*time.Second))
		require.NoError(t, err)
		stale, err := h.Token("/count", body, time.Now().Add(-90*time.Second))
		require.NoError(t, err)
		var given []string
		next := ahead
		h.Authorize = func(method, url string, b []byte) string {
			given = append(given, method+" "+url)
			require.Equal(t, body, b)
			return next
		}
		_, err = h.Count(t.Context(), f)
		require.NoError(t, err, "a token dated 45 s ahead is within the relay's 60 s")
		require.Equal(t, []string{"POST http://" + r.Host + "/count"}, given)
		next = stale
		_, err = h.Count(t.Context(), f)
		var refused *RefusedError
		require.ErrorAs(t, err, &refused, "the given token was sent, not one SK signs")
		require.Equal(t, http.StatusUnauthorized, refused.Status)
		next = ""
		_, err = h.Count(t.Context(), f)
		require.NoError(t, err, `"" lets SK sign`)
	})

	t.Run("PublishRefused", func(t *testing.T) {
		t.Parallel()
		h, _ := setupHTTP(t)
		_, _, err := h.Publish(t.Context(), signedKind(t, h.SK, event.KindStreamMessage, "no channel"))
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, "POST /events", refused.Op)
		require.Equal(t, http.StatusBadRequest, refused.Status)
		require.Equal(t, "invalid: channel-scoped events must include an h tag", refused.Message)
	})

	t.Run("RefusedCarriesStatus", func(t *testing.T) {
		t.Parallel()
		h, _ := setupHTTP(t)
		_, err := h.Query(t.Context(), event.Filter{Kinds: []int{30300}})
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, "POST /query", refused.Op)
		require.Equal(t, http.StatusForbidden, refused.Status)
		require.Equal(t, "restricted: author-only kinds require authors=[self]", refused.Message)
	})

	t.Run("RefusedWithMessage", func(t *testing.T) {
		t.Parallel()
		owner := event.GenerateKey()
		r := relaytest.Start(t, map[string]string{
			"BUZZ_REQUIRE_RELAY_MEMBERSHIP": "true", "RELAY_OWNER_PUBKEY": event.PubKey(owner)})
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		h := &HTTP{BaseURL: "http://" + r.Host + "/", SK: event.GenerateKey(), Client: &http.Client{Transport: tr}}
		_, err := h.Count(t.Context(), event.Filter{Kinds: []int{1}})
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, "POST /count", refused.Op)
		require.Equal(t, http.StatusForbidden, refused.Status)
		// The bridge's error and its message, joined.
		require.Equal(t, "relay_membership_required: You must be a relay member to access this relay", refused.Message)
		h.SK = owner
		n, err := h.Count(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	// NIP-98 ids are single-use: the same request twice within one second
	// must still carry two distinct tokens.
	t.Run("SameRequestTwiceInOneSecond", func(t *testing.T) {
		t.Parallel()
		h, _ := setupHTTP(t)
		for range 3 {
			n, err := h.Count(t.Context(), event.Filter{Kinds: []int{1}})
			require.NoError(t, err)
			require.Zero(t, n)
		}
	})

	t.Run("Count", func(t *testing.T) {
		t.Parallel()
		h, r := setupHTTP(t)
		ch := "0b9c5a52-3f8e-4d6b-9a51-2c0e7d4f6a11"
		ok, msg, err := h.Publish(t.Context(), signedKind(t, h.SK, event.KindCreateGroup, "",
			event.Tag{"h", ch}, event.Tag{"name", "general"}))
		require.NoError(t, err)
		require.True(t, ok, msg)
		for i := range 3 {
			ok, msg, err := h.Publish(t.Context(), signedKind(t, h.SK, event.KindStreamMessage, "m"+strconv.Itoa(i), event.Tag{"h", ch}))
			require.NoError(t, err)
			require.True(t, ok, msg)
		}
		ok, msg, err = h.Publish(t.Context(), signed(t, h.SK, "a note, not counted"))
		require.NoError(t, err)
		require.True(t, ok, msg)
		// Only the filter sent decides the count: three kind 9 among the
		// create, its relay-signed follow-ups and the note.
		n, err := h.Count(t.Context(), event.Filter{Kinds: []int{9}})
		require.NoError(t, err)
		require.EqualValues(t, 3, n)
		n, err = h.Count(t.Context(), event.Filter{Kinds: []int{9}}, event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.EqualValues(t, 4, n)
		// The WebSocket count agrees with the bridge's.
		c, err := Dial(t.Context(), "ws://"+r.Host, h.SK)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		n, err = c.Count(t.Context(), event.Filter{Kinds: []int{9}})
		require.NoError(t, err)
		require.EqualValues(t, 3, n)
	})

	t.Run("Host", func(t *testing.T) {
		t.Parallel()
		base, r := setupHTTP(t)
		const host = "b.soak.test" // a community host without the relay's port
		_, err := r.App.Store().CommunityAdd(t.Context(), store.CommunityAddParams{Host: host})
		require.NoError(t, err)
		base.BaseURL = "http://127.0.0.1:" + strconv.Itoa(r.Port) // the deployment host
		h := *base
		h.Host = host
		ev := signed(t, h.SK, "only in "+host)
		ok, msg, err := h.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok, msg)
		require.Empty(t, msg)
		got, err := h.Query(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Equal(t, []event.Event{ev}, got)
		n, err := h.Count(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		// The same address without Host is the deployment community, which
		// does not have the event.
		got, err = base.Query(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Empty(t, got)
		// And the WebSocket agrees: the event is in the second community.
		c, err := DialHost(t.Context(), "ws://127.0.0.1:"+strconv.Itoa(r.Port), host, h.SK)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		got, err = c.Query(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Equal(t, []event.Event{ev}, got)
	})
}
