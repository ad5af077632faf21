package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Relay membership across processes (docs/PROTOCOL.md §16.4): with the relay-membership gate on and REDIS_URL
// set, `buzz-relay member remove` disconnects the member's connections on
// both processes within a second: NOTICE "restricted: not a relay member",
// then close 1008. Each process's own revalidation runs every 60 s, so a
// disconnect this fast can only come from the control message.
func TestScaleOutRelayMemberRemoved(t *testing.T) {
	t.Parallel()
	owner := eventtest.NewKey()
	s := startScaleOut(t, map[string]string{"BUZZ_REQUIRE_RELAY_MEMBERSHIP": "true", "RELAY_OWNER_PUBKEY": owner.PubKey})
	cli := baseEnv()
	for _, k := range []string{"DATABASE_URL", "REDIS_URL", "BUZZ_RELAY_PRIVATE_KEY"} {
		cli[k] = s.a.Env[k]
	}
	u := eventtest.NewKey()
	added := runBinary(t, cli, "member", "add", "--host", deploymentHost, "--pubkey", u.PubKey)
	require.Equal(t, 0, added.Code, "stdout:\n%s\nstderr:\n%s", added.Stdout, added.Stderr)
	onA := authedPeer(t, s.a, "U on A", u)
	onB := authedPeer(t, s.b, "U on B", u)

	began := time.Now()
	res := runBinary(t, cli, "member", "remove", "--host", deploymentHost, "--pubkey", u.PubKey)
	require.Equal(t, 0, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	require.Equal(t, "{\"removed\":true}\n", res.Stdout)
	require.Empty(t, res.Stderr, "the control message was sent")
	for _, w := range []*peer{onA, onB} {
		w.take(deliveryWait, "NOTICE", isFrame("NOTICE", wire.MsgNotRelayMember))
		select {
		case <-w.done:
		case <-time.After(deliveryWait):
			t.Fatalf("%s: still open after the NOTICE", w.name)
		}
		require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(w.err), "%s: %v", w.name, w.err)
	}
	require.Less(t, time.Since(began), 10*time.Second, "the control message disconnected U, not the 60 s revalidation")
}

// mapped reports whether p's NIP-11 document for host is that of a
// community (only those advertise read_state_snapshot).
func mapped(t *testing.T, p *relayProc, host string) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.AppAddr+"/", nil)
	require.NoError(t, err)
	req.Host = host
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return strings.Contains(string(body), `"read_state_snapshot"`)
}

// The hosts control op: B has cached a host as unknown (for 5 s); the
// operator adds it as an alias with REDIS_URL set, and B serves it at once,
// well inside that negative TTL. Likewise for a new community's host.
func TestScaleOutHostsInvalidation(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	cli := baseEnv()
	for _, k := range []string{"DATABASE_URL", "REDIS_URL", "BUZZ_RELAY_PRIVATE_KEY"} {
		cli[k] = s.a.Env[k]
	}
	for _, cmd := range [][]string{
		{"community", "add-host", "--host", "alias-" + uuid.NewString()[:8] + ".example", "--to", deploymentHost},
		{"community", "add", "--host", "new-" + uuid.NewString()[:8] + ".example"},
	} {
		host := cmd[3]
		cached := time.Now()
		require.False(t, mapped(t, s.b, host), "unknown, and now cached so for 5 s")
		res := runBinary(t, cli, cmd...)
		require.Equal(t, 0, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		require.Empty(t, res.Stderr, "the control message was sent")
		require.Eventually(t, func() bool { return mapped(t, s.b, host) }, 10*time.Second, 20*time.Millisecond)
		require.Less(t, time.Since(cached), 4*time.Second, "%s: B served the host while its negative cache entry was still valid", cmd[1])
	}
}
