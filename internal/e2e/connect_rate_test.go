package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestConnectRate: with BUZZ_WS_CONNECT_RATE set, an address past its
// bucket gets 429 before any WebSocket exists, while other addresses, and
// the connections it already holds, are untouched; X-Forwarded-For counts
// only from a trusted proxy; the refusal is counted and audited, and the
// bucket refills.
func TestConnectRate(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_WS_CONNECT_RATE": "0.2", "BUZZ_WS_CONNECT_BURST": "2", "BUZZ_TRUSTED_PROXIES": "127.0.0.3",
	})
	e := &auEnv{r: r, cid: communityID(t, r, r.Host)}
	upgrade := func(from, forwardedFor string) (int, string, string) {
		return upgradeFrom(t, r, from, forwardedFor)
	}

	// 127.0.0.1 spends its burst of two.
	held := []*relaytest.WS{r.Dial(t, ""), r.Dial(t, "")}
	status, body, retry := upgrade("127.0.0.1", "")
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "rate-limited: too many connections from this address", body)
	require.Equal(t, "5", retry)
	// A forwarded address from an untrusted peer changes nothing.
	status, _, _ = upgrade("127.0.0.1", "198.51.100.9")
	require.Equal(t, http.StatusTooManyRequests, status)

	// Another address has a bucket of its own.
	status, _, _ = upgrade("127.0.0.2", "")
	require.Equal(t, http.StatusSwitchingProtocols, status)
	// A trusted proxy is judged by the client it names.
	status, _, _ = upgrade("127.0.0.3", "127.0.0.1")
	require.Equal(t, http.StatusTooManyRequests, status, "the proxy names the limited client")
	status, _, _ = upgrade("127.0.0.3", "203.0.113.50, 198.51.100.7")
	require.Equal(t, http.StatusSwitchingProtocols, status, "the proxy names a fresh client")

	// The connections 127.0.0.1 already holds keep working.
	for _, w := range held {
		w.Auth(eventtest.NewKey())
	}
	require.Equal(t, 3.0, r.Metric(t, "buzz_ws_connect_rate_limited_total"))

	// The bucket refills at one every 5 s (slow enough that the refusals
	// above all come before the first token is back).
	require.Eventually(t, func() bool {
		status, _, _ := upgrade("127.0.0.1", "")
		return status == http.StatusSwitchingProtocols
	}, 15*time.Second, 250*time.Millisecond)

	pool := e.stop(t)
	limited := auFind(auEntries(t, pool, e.cid), "rate_limit_exceeded", "")
	require.NotEmpty(t, limited, "the sampler writes the first refusal of the window individually")
	require.Empty(t, limited[0].Actor, "no principal before AUTH")
	require.Equal(t, "ws_connect_per_address", limited[0].Detail["limit"])
	require.Equal(t, "ws", limited[0].Detail["transport"])
	auVerified(t, pool, e.cid)
}

// upgradeFrom sends a WebSocket upgrade to r from the loopback address
// from, with an X-Forwarded-For header unless forwardedFor is "", and
// returns the status, the body of a refusal and its Retry-After.
func upgradeFrom(t *testing.T, r *relaytest.Relay, from, forwardedFor string) (int, string, string) {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/", nil)
	require.NoError(t, err)
	req.Host = r.Host
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if forwardedFor != "" {
		req.Header.Set("X-Forwarded-For", forwardedFor)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, "", ""
	}
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body), resp.Header.Get("Retry-After")
}
