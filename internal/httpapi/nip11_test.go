package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/httpapi"
)

const nip11Accept = "application/nostr+json"

func TestNIP11(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	t.Run("Fields", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.do(t, http.MethodGet, b.ta.Host, "/", nil, map[string]string{"Accept": nip11Accept})
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, "application/nostr+json", res.header.Get("Content-Type"))
		require.JSONEq(t, `{
			"name": "Buzz Relay",
			"description": "Buzz — private team communication relay",
			"pubkey": null,
			"contact": null,
			"supported_nips": [1, 2, 9, 10, 11, 16, 17, 23, 25, 29, 33, 38, 40, 42, 45, 50, 77],
			"software": "https://github.com/buzz-relay/buzz",
			"version": "test-1",
			"limitation": {
				"max_message_length": 524288,
				"max_subscriptions": 1024,
				"max_filters": 10,
				"max_limit": 1000,
				"max_subid_length": 256,
				"max_content_length": 262144,
				"max_event_bytes": 393216,
				"min_pow_difficulty": null,
				"auth_required": true,
				"payment_required": false,
				"restricted_writes": true,
				"max_filter_ids": 1000,
				"max_filter_authors": 1000,
				"max_filter_kinds": 64,
				"max_filter_tag_values": 1000,
				"max_filter_tag_keys": 8,
				"max_subscription_index_keys": 4096,
				"max_connection_index_keys": 16384,
				"max_connection_filter_bytes": 262144,
				"max_p_tags": 100,
				"rate_limits": {
					"human_messages_per_min": 60,
					"human_api_calls_per_min": 300,
					"ws_events_per_sec": 10,
					"agent_messages_per_min": 120,
					"agent_api_calls_per_min": 600,
					"channel_creates_per_hour": 20
				},
				"max_reads_per_pubkey": `+strconv.Itoa(config.DefaultReadsPerPubkey())+`,
				"max_reads_per_connection": 4,
				"read_time_per_second_ms": 100,
				"read_time_burst_ms": 1000
			},
			"read_state_snapshot": {
				"version": 1,
				"max_events": 4096,
				"max_event_array_bytes": 8388608
			}
		}`, res.body)
	})

	t.Run("UnmappedHost", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.do(t, http.MethodGet, "nowhere.test", "/", nil, map[string]string{"Accept": nip11Accept})
		require.Equal(t, http.StatusOK, res.status)
		require.Contains(t, res.body, `"name":"Buzz Relay"`)
		require.NotContains(t, res.body, "read_state_snapshot", "the snapshot is a community read")
	})

	t.Run("ReadStateSnapshotOnMappedHostsOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		alias := fixture.Host()
		fixture.Alias(t, d.pool, b.tb.CommunityID, alias)
		advert := `"read_state_snapshot":{"version":1,"max_events":4096,"max_event_array_bytes":8388608}`
		for _, host := range []string{b.ta.Host, strings.ToUpper(b.tb.Host) + ".", alias, b.local.Host} {
			for _, path := range []string{"/", "/info"} {
				res := b.do(t, http.MethodGet, host, path, nil, map[string]string{"Accept": nip11Accept})
				require.Equal(t, http.StatusOK, res.status)
				require.Contains(t, res.body, advert, "%s%s", host, path)
			}
		}
		plain := b.do(t, http.MethodGet, "nowhere.test", "/info", nil, nil).body
		mapped := b.do(t, http.MethodGet, b.ta.Host, "/info", nil, nil).body
		require.Equal(t, strings.TrimSuffix(plain, "}")+","+advert+"}", mapped, "the same document plus the field")
		require.NotContains(t, b.do(t, http.MethodGet, "", "/info", nil, nil).body, "read_state_snapshot")
	})

	t.Run("InfoAndPlainFallback", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		info := b.do(t, http.MethodGet, b.ta.Host, "/info", nil, nil)
		require.Equal(t, http.StatusOK, info.status)
		plain := b.do(t, http.MethodGet, b.ta.Host, "/", nil, nil)
		require.Equal(t, http.StatusOK, plain.status)
		require.Equal(t, info.body, plain.body)
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.HTTPRequests.WithLabelValues("200", "/info")))
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.HTTPRequests.WithLabelValues("200", "/")))
	})

	t.Run("UpgradeGoesToWebSocket", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		ws, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(b.url, "http"),
			&websocket.DialOptions{Host: b.ta.Host, HTTPClient: b.client})
		require.NoError(t, err)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		require.NoError(t, ws.Close(websocket.StatusNormalClosure, ""))
		up := map[string]string{"Connection": "keep-alive, Upgrade", "Upgrade": "websocket", "Accept": nip11Accept}
		require.Contains(t, b.do(t, http.MethodGet, b.ta.Host, "/", nil, up).body, `"name":"Buzz Relay"`)
	})

	t.Run("CORSAlwaysStar", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d, func(c *httpapi.Config) { c.Settings.CORSOrigins = []string{"https://app.test"} })
		res := b.do(t, http.MethodGet, b.ta.Host, "/", nil, map[string]string{"Accept": nip11Accept, "Origin": "https://other.test"})
		require.Equal(t, "*", res.header.Get("Access-Control-Allow-Origin"))
		pre := b.do(t, http.MethodOptions, b.ta.Host, "/", nil, map[string]string{"Origin": "https://other.test"})
		require.Equal(t, http.StatusNoContent, pre.status)
		require.Equal(t, "*", pre.header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "GET, OPTIONS", pre.header.Get("Access-Control-Allow-Methods"))
		require.Equal(t, "*", pre.header.Get("Access-Control-Allow-Headers"))
	})

	t.Run("SelfOnlyWithRelayKey", func(t *testing.T) {
		t.Parallel()
		without := setup(t, d)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(without.do(t, http.MethodGet, without.ta.Host, "/info", nil, nil).body), &doc))
		require.NotContains(t, doc, "self")

		pk := without.key.PubKey
		with := without.serve(t, func(c *httpapi.Config) { c.RelayPubkey = pk })
		doc = nil
		require.NoError(t, json.Unmarshal([]byte(with.do(t, http.MethodGet, with.ta.Host, "/info", nil, nil).body), &doc))
		require.Equal(t, pk, doc["self"])
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t, newDB(t), func(c *httpapi.Config) {
		c.Health = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("health " + r.URL.Path)) })
	})
	res := b.do(t, http.MethodGet, "nowhere.test", "/health", nil, nil)
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "ok", res.body)
	require.Equal(t, "health /_readiness", b.do(t, http.MethodGet, b.ta.Host, "/_readiness", nil, nil).body)
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, b.ta.Host, "/nope", nil, nil).status)
}
