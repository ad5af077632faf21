package client

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

func TestNIP98Header(t *testing.T) {
	t.Parallel()
	sk := event.GenerateKey()
	body := []byte(`[{"kinds":[9]}]`)
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
	require.Equal(t, "http://localhost:3000/query", ev.Tags.First("u").Value())
	require.Equal(t, "POST", ev.Tags.First("method").Value())
	sum := sha256.Sum256(body)
	require.Equal(t, hex.EncodeToString(sum[:]), ev.Tags.First("payload").Value())
}

func TestHTTP(t *testing.T) {
	t.Parallel()

	setupHTTP := func(t *testing.T, h http.HandlerFunc) *HTTP {
		t.Helper()
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return &HTTP{BaseURL: srv.URL, SK: event.GenerateKey(), Client: srv.Client()}
	}

	t.Run("PublishAccepted", func(t *testing.T) {
		t.Parallel()
		h := setupHTTP(t, func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/events", r.URL.Path)
			require.True(t, strings.HasPrefix(r.Header.Get("Authorization"), "Nostr "))
			b, _ := io.ReadAll(r.Body)
			ev, err := event.Parse(b)
			require.NoError(t, err)
			_, _ = io.WriteString(w, `{"event_id":"`+ev.ID+`","accepted":true,"message":"duplicate:"}`)
		})
		ev := event.Event{CreatedAt: time.Now().Unix(), Kind: 1}
		require.NoError(t, ev.Sign(h.SK))
		ok, msg, err := h.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "duplicate:", msg)
	})

	t.Run("RefusedCarriesStatus", func(t *testing.T) {
		t.Parallel()
		h := setupHTTP(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":"restricted: author-only kinds require authors=[self]"}`)
		})
		_, err := h.Query(t.Context(), event.Filter{Kinds: []int{30078}})
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, http.StatusForbidden, refused.Status)
		require.Equal(t, "restricted: author-only kinds require authors=[self]", refused.Message)
	})

	t.Run("Count", func(t *testing.T) {
		t.Parallel()
		h := setupHTTP(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			require.JSONEq(t, `[{"kinds":[9]}]`, string(b))
			_, _ = io.WriteString(w, `{"count":42}`)
		})
		n, err := h.Count(t.Context(), event.Filter{Kinds: []int{9}})
		require.NoError(t, err)
		require.EqualValues(t, 42, n)
	})
}
