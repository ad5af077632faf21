package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// tryDial opens a WebSocket on the relay with hostHeader. On success the
// connection is closed when the test ends; otherwise it returns the HTTP
// status of the refusal (0 when there was no answer).
func tryDial(t *testing.T, p *relayProc, hostHeader string) (*wsClient, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+p.AppAddr+"/", &websocket.DialOptions{
		Host: hostHeader, HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	})
	if err != nil {
		if resp == nil {
			return nil, 0
		}
		return nil, resp.StatusCode
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	w := &wsClient{t: t, c: c}
	msg := w.next()
	require.Equal(t, "AUTH", msg[0])
	w.challenge = msg[1].(string)
	return w, http.StatusSwitchingProtocols
}

// A community added with the CLI while the relay runs is served
// within 5 s, without a restart. The relay caches a miss for 5 s, so the
// test first makes it cache one for the new host.
func TestCommunityAddedWhileRunning(t *testing.T) {
	t.Parallel()
	p := startReady(t, externalEnv(t))
	const host = "late.test"
	const pollEvery = 100 * time.Millisecond
	const missTTL = 5 * time.Second

	_, status := tryDial(t, p, host)
	require.Equal(t, http.StatusNotFound, status, "no community yet")
	missCached := time.Now()

	res := runBinary(t, p.Env, "community", "add", "--host", host)
	require.Equal(t, 0, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	added := time.Now()

	// The latest attempt that must be served: the first one after the
	// cached miss expired (or after the add, if that took longer), allowing
	// one polling interval and the time of a refused dial or two.
	const slack = 250 * time.Millisecond
	servedBy := missCached.Add(missTTL)
	if added.After(servedBy) {
		servedBy = added
	}
	servedBy = servedBy.Add(pollEvery + slack)
	deadline := added.Add(missTTL + 5*time.Second) // room to report how late it was
	var w *wsClient
	for {
		attempt := time.Now()
		if w, status = tryDial(t, p, host); w != nil {
			require.False(t, attempt.After(servedBy),
				"served %s after the add; the negative cache allows 5 s", attempt.Sub(added).Round(time.Millisecond))
			break
		}
		require.Equal(t, http.StatusNotFound, status, "only the not-found answer while the miss is cached")
		require.True(t, time.Now().Before(deadline), "not served %s after the add", time.Since(added).Round(time.Millisecond))
		time.Sleep(pollEvery) // polling interval, not a wait for an outcome
	}
	// Served as its own tenant: AUTH for ws://late.test succeeds.
	w.auth(eventtest.NewKey(), "ws://"+host)
	p.waitReady()
	require.False(t, p.exited(), "no restart")
}
