package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// opsGet fetches url with optional headers.
func opsGet(t testing.TB, url string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// opsEventually polls cond every 20 ms until it holds or 10 s pass.
func opsEventually(t testing.TB, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			require.FailNowf(t, "condition not met within 10s", msg, args...)
		case <-tick.C:
		}
	}
}

// opsMetric returns the value of one series (name plus its exact label
// set, e.g. `buzz_events_stored_total{kind="1"}`), and whether it exists.
func opsMetric(t testing.TB, r *relaytest.Relay, series string) (float64, bool) {
	t.Helper()
	_, body := opsGet(t, r.MetricsURL+"/metrics", nil)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			require.NoError(t, err, line)
			return v, true
		}
	}
	return 0, false
}

func TestNIP11Limits(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_CORS_ORIGINS": "https://app.example"})
	resp, body := opsGet(t, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/", map[string]string{
		"Accept": "application/nostr+json", "Origin": "https://elsewhere.example"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	require.JSONEq(t, `{
		"name": "Buzz Relay",
		"description": "Buzz — private team communication relay",
		"pubkey": null,
		"contact": null,
		"supported_nips": [1, 2, 9, 10, 11, 16, 17, 23, 25, 29, 33, 38, 40, 42, 45, 50, 77],
		"software": "https://github.com/buzz-relay/buzz",
		"version": "`+app.Version+`",
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
			"rate_limits": {"human_messages_per_min": 0, "human_api_calls_per_min": 0, "ws_events_per_sec": 0,
				"agent_messages_per_min": 0, "agent_api_calls_per_min": 0, "channel_creates_per_hour": 0},
			"max_reads_per_pubkey": 10000,
			"max_reads_per_connection": 1000,
			"read_time_per_second_ms": 0,
			"read_time_burst_ms": 1000
		},
		"read_state_snapshot": {"version": 1, "max_events": 4096, "max_event_array_bytes": 8388608}}`, string(body))
	var doc struct {
		Limitation struct {
			MaxMessageLength int `json:"max_message_length"`
			MaxSubscriptions int `json:"max_subscriptions"`
			MaxFilters       int `json:"max_filters"`
			MaxLimit         int `json:"max_limit"`
			MaxSubIDLength   int `json:"max_subid_length"`
			MaxContentLength int `json:"max_content_length"`
		} `json:"limitation"`
	}
	require.NoError(t, json.Unmarshal(body, &doc))
	lim := doc.Limitation
	resp, info := opsGet(t, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/info", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, body, info)

	key := eventtest.NewKey()
	const notice = "invalid message: Invalid message format: "

	t.Run("MaxMessageLength", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", key)
		target := lim.MaxMessageLength + 1024
		empty, err := json.Marshal([]any{"EVENT", key.Signed(t, 1, eventtest.Content(""))})
		require.NoError(t, err)
		ev := key.Signed(t, 1, eventtest.Content(strings.Repeat("x", target-len(empty))))
		frame, err := json.Marshal([]any{"EVENT", ev})
		require.NoError(t, err)
		require.Len(t, frame, target)
		w.Send(frame)
		msg := "error: frame too large (" + strconv.Itoa(target) + " bytes, limit " + strconv.Itoa(lim.MaxMessageLength) + ")"
		require.Equal(t, []any{"NOTICE", msg}, w.Next())
		require.Equal(t, []any{"OK", ev.ID, false, msg}, w.Next())
		_, closed, eose := w.Req("after", map[string]any{"kinds": []int{1}, "limit": 1})
		require.True(t, eose, closed)
	})

	t.Run("MaxContentLength", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", key)
		ok, msg := w.Publish(key.Signed(t, 1, eventtest.Content(strings.Repeat("y", lim.MaxContentLength+1))))
		require.False(t, ok)
		require.True(t, strings.HasPrefix(msg, "invalid: content exceeds"), msg)
		w.MustPublish(key.Signed(t, 1, eventtest.Content(strings.Repeat("y", lim.MaxContentLength))))
	})

	t.Run("MaxFilters", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", key)
		filters := make([]any, lim.MaxFilters+1)
		for i := range filters {
			filters[i] = map[string]any{"kinds": []int{1}, "limit": 1}
		}
		w.Send(append([]any{"REQ", "many"}, filters...)...)
		require.Equal(t, []any{"NOTICE", notice + "REQ contains " + strconv.Itoa(lim.MaxFilters+1) + " filters, maximum is " + strconv.Itoa(lim.MaxFilters)}, w.Next())
		_, closed, eose := w.Req("max", filters[:lim.MaxFilters]...)
		require.True(t, eose, closed)
	})

	t.Run("MaxSubIDLength", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", key)
		w.Send("REQ", strings.Repeat("s", lim.MaxSubIDLength+1), map[string]any{"kinds": []int{1}, "limit": 1})
		require.Equal(t, []any{"NOTICE", notice + "REQ sub_id exceeds maximum length of " + strconv.Itoa(lim.MaxSubIDLength) + " bytes"}, w.Next())
		_, closed, eose := w.Req(strings.Repeat("s", lim.MaxSubIDLength), map[string]any{"kinds": []int{1}, "limit": 1})
		require.True(t, eose, closed)
	})

	t.Run("MaxSubscriptions", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", key)
		for i := range lim.MaxSubscriptions {
			w.Send("REQ", "sub"+strconv.Itoa(i), map[string]any{"kinds": []int{}})
		}
		eoses := 0
		rpReadUntil(t, w, func(fs [][]any) bool {
			if len(fs) > 0 && fs[len(fs)-1][0] == "EOSE" {
				eoses++
			}
			return eoses == lim.MaxSubscriptions
		})
		_, closed, eose := w.Req("one-too-many", map[string]any{"kinds": []int{}})
		require.False(t, eose)
		require.Equal(t, "error: too many subscriptions", closed)
		// Reusing an id replaces that subscription.
		_, closed, eose = w.Req("sub0", map[string]any{"kinds": []int{}})
		require.True(t, eose, closed)
	})

	t.Run("MaxLimit", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		now := time.Now().Unix()
		rpInsertEvents(t, r, "", "", rpSignMany(t, author, 1, lim.MaxLimit+5, func(i int) []eventtest.Option {
			return []eventtest.Option{eventtest.At(now - int64(i))}
		}))
		w := rpAuthed(t, r, "", key)
		evs, closed, eose := w.Req("l", map[string]any{"kinds": []int{1}, "authors": []string{author.PubKey}, "limit": lim.MaxLimit + 1})
		require.True(t, eose, closed)
		require.Len(t, evs, lim.MaxLimit)
		status, resp := brHTTP(t, r, "/query", key, []byte(`[{"kinds":[1],"authors":["`+author.PubKey+`"],"limit":`+strconv.Itoa(lim.MaxLimit+1)+`}]`))
		require.Equal(t, http.StatusOK, status)
		var got []event.Event
		require.NoError(t, json.Unmarshal(resp, &got))
		require.Len(t, got, lim.MaxLimit)
	})
}

func TestNIP11WithRelayKey(t *testing.T) {
	t.Parallel()
	sk := event.GenerateKey()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_CORS_ORIGINS":      "https://app.example",
		"BUZZ_RELAY_PRIVATE_KEY": hex.EncodeToString(sk),
	})
	for _, h := range []map[string]string{
		{"Accept": "application/nostr+json", "Origin": "https://other.example"},
		{"Origin": "https://app.example"},
	} {
		resp, body := opsGet(t, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/", h)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
		var doc map[string]any
		require.NoError(t, json.Unmarshal(body, &doc))
		require.Equal(t, event.PubKey(sk), doc["self"])
	}
	// Bridge responses follow the list instead.
	key := eventtest.NewKey()
	resp := r.Exchange(t, relaytest.Request{Path: "/query", Key: &key, Body: []byte(`[{"kinds":[1]}]`),
		Header: map[string]string{"Origin": "https://other.example"}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

func TestHealth(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	appURL := "http://127.0.0.1:" + strconv.Itoa(r.Port)
	for _, base := range []string{r.HealthURL, appURL} {
		resp, body := opsGet(t, base+"/_liveness", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "ok", string(body))
		resp, body = opsGet(t, base+"/_readiness", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.JSONEq(t, `{"status":"ready"}`, string(body))
	}
	resp, body := opsGet(t, appURL+"/health", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", string(body))

	w := rpAuthed(t, r, "", eventtest.NewKey())
	_, closed, eose := w.Req("live", map[string]any{"kinds": []int{1}, "limit": 0})
	require.True(t, eose, closed)
	var status map[string]any
	opsEventually(t, func() bool {
		resp, body := opsGet(t, r.HealthURL+"/_status", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		status = nil
		require.NoError(t, json.Unmarshal(body, &status))
		return status["connections"] == float64(1) && status["subscriptions"] == float64(1)
	}, "connections and subscriptions of /_status")
	require.Equal(t, "buzz-relay", status["service"])
	require.Equal(t, app.Version, status["version"])
	require.Equal(t, "ok", status["postgres"])
	require.Equal(t, "disabled", status["redis"])
	require.Equal(t, "disabled", status["read_replica"])
	uptime, ok := status["uptime_seconds"].(float64)
	require.True(t, ok, "%v", status)
	require.GreaterOrEqual(t, uptime, float64(0))
	require.Len(t, status, 8, "%v", status)

	// PostgreSQL unreachable for this relay: its database refuses
	// connections and the pool's are terminated.
	ctx := context.Background()
	u, err := url.Parse(r.DBURL)
	require.NoError(t, err)
	dbName := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	admin, err := pgx.Connect(ctx, dbtest.URL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "ALTER DATABASE "+dbName+" ALLOW_CONNECTIONS false")
	require.NoError(t, err)
	reopened := false
	reopen := func() {
		if !reopened {
			reopened = true
			_, err := admin.Exec(ctx, "ALTER DATABASE "+dbName+" ALLOW_CONNECTIONS true")
			require.NoError(t, err)
		}
	}
	defer reopen()
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
		strings.TrimPrefix(u.Path, "/"))
	require.NoError(t, err)
	opsEventually(t, func() bool {
		resp, body := opsGet(t, r.HealthURL+"/_readiness", nil)
		return resp.StatusCode == http.StatusServiceUnavailable && string(body) == `{"status":"not_ready","postgres":false}`
	}, "readiness 503 not_ready with PostgreSQL down")
	resp, body = opsGet(t, r.HealthURL+"/_liveness", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", string(body))
	resp, body = opsGet(t, r.HealthURL+"/_status", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.Unmarshal(body, &status))
	require.Equal(t, "error", status["postgres"])

	reopen()
	opsEventually(t, func() bool {
		resp, body := opsGet(t, r.HealthURL+"/_readiness", nil)
		return resp.StatusCode == http.StatusOK && string(body) == `{"status":"ready"}`
	}, "readiness back to 200 once PostgreSQL answers")
}

// metricNames are the metrics of docs/PROTOCOL.md §11.2.
var metricNames = []string{
	"buzz_ws_connections_active", "buzz_ws_connections_total", "buzz_ws_backpressure_disconnects_total",
	"buzz_ws_auth_timeouts_total", "buzz_ws_connect_rate_limited_total", "buzz_subscriptions_active", "buzz_events_received_total",
	"buzz_events_stored_total", "buzz_events_rejected_total", "buzz_event_processing_seconds",
	"buzz_fanout_recipients", "buzz_post_commit_dispatch_errors_total", "buzz_auth_attempts_total",
	"buzz_auth_failures_total", "buzz_membership_cache_hits_total", "buzz_membership_cache_misses_total",
	"buzz_accessible_channels_cache_hits_total", "buzz_accessible_channels_cache_misses_total",
	"buzz_count_fallback_rejections_total", "buzz_channels_created_total", "buzz_partition_maintenance_errors_total",
	"buzz_db_pool_size", "buzz_db_pool_idle", "buzz_db_pool_active", "buzz_db_pool_max",
	"http_requests_total", "http_request_latency_ms",
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)

	// Every name is exposed from the start, before any traffic.
	_, body := opsGet(t, r.MetricsURL+"/metrics", nil)
	for _, name := range metricNames {
		require.Contains(t, string(body), "\n# TYPE "+name+" ", "metric %s is not exposed", name)
	}

	const n = 3
	keys := make([]eventtest.Key, n)
	conns := make([]*relaytest.WS, n)
	for i := range conns {
		keys[i] = eventtest.NewKey()
		conns[i] = rpAuthed(t, r, "", keys[i])
	}
	opsEventually(t, func() bool {
		v, _ := opsMetric(t, r, "buzz_ws_connections_active")
		return v == n
	}, "buzz_ws_connections_active = %d", n)

	series := `buzz_events_stored_total{kind="1"}`
	before, _ := opsMetric(t, r, series)
	conns[0].MustPublish(keys[0].Signed(t, 1, eventtest.Content("counted")))
	opsEventually(t, func() bool {
		v, ok := opsMetric(t, r, series)
		return ok && v == before+1
	}, "%s grew by 1 from %v", series, before)

	conns[1].C.CloseNow()
	opsEventually(t, func() bool {
		v, _ := opsMetric(t, r, "buzz_ws_connections_active")
		return v == n-1
	}, "buzz_ws_connections_active = %d after a close", n-1)
}

func TestLogsKeepSecrets(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	r := relaytest.StartWithLogger(t, map[string]string{"BUZZ_LOG_LEVEL": "debug"}, logs)
	key := eventtest.NewKey()

	w := r.Dial(t, "")
	authEv := key.Signed(t, event.KindAuth, eventtest.Content(""),
		eventtest.Tag("challenge", w.Challenge), eventtest.Tag("relay", "ws://"+w.Host))
	w.Send("AUTH", authEv)
	require.Equal(t, []any{"OK", authEv.ID, true, ""}, w.Next())
	secret := key.Signed(t, 1, eventtest.Content("SECRET-XYZ over the socket"), eventtest.Tag("t", "TAG-SECRET-XYZ"))
	w.MustPublish(secret)
	// A refused event and a failed AUTH are logged too, still without content.
	ok, _ := w.Publish(key.Signed(t, 0, eventtest.Content("SECRET-XYZ not json")))
	require.False(t, ok)

	tok := relaytest.Token(t, key, "http://"+r.Host+"/events", http.MethodPost)
	bridged := key.Signed(t, 1, eventtest.Content("SECRET-XYZ over the bridge"))
	status, resp := r.Do(t, relaytest.Request{Path: "/events", Authorization: tok, Body: mustJSON(t, bridged)})
	require.Equal(t, http.StatusOK, status, string(resp))
	status, _ = r.Do(t, relaytest.Request{Path: "/events", Authorization: tok, Body: mustJSON(t, bridged)})
	require.Equal(t, http.StatusUnauthorized, status) // replay: a failure path of the same header
	badTok := relaytest.Token(t, key, "http://elsewhere.test/events", http.MethodPost)
	status, _ = r.Do(t, relaytest.Request{Path: "/events", Authorization: badTok, Body: mustJSON(t, bridged)})
	require.Equal(t, http.StatusUnauthorized, status)

	failed := r.Dial(t, "")
	badAuth := key.Signed(t, event.KindAuth, eventtest.Content(""),
		eventtest.Tag("challenge", failed.Challenge+"x"), eventtest.Tag("relay", "ws://"+failed.Host))
	failed.Send("AUTH", badAuth)
	require.Equal(t, []any{"OK", badAuth.ID, false, "auth-required: verification failed"}, failed.Next())

	r.Stop() // every line is written once the relay has drained
	out := logs.String()
	require.Contains(t, out, `"msg":"http bridge request"`, "debug logs were not captured")
	for _, never := range []string{
		"SECRET-XYZ",
		authEv.ID, authEv.Sig, w.Challenge,
		badAuth.ID, failed.Challenge,
		tok, strings.TrimPrefix(tok, "Nostr "), badTok, strings.TrimPrefix(badTok, "Nostr "),
	} {
		require.NotContains(t, out, never)
	}
}
