package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// received is what a listener endpoint was sent.
type received struct {
	body []byte
	auth string
}

// listenerEndpoint is a real local HTTPS listener that records every POST
// and answers 204. certFile holds its certificate, for SSL_CERT_FILE.
type listenerEndpoint struct {
	srv      *httptest.Server
	certFile string
	mu       sync.Mutex
	got      []received
}

func newListenerEndpoint(t *testing.T) *listenerEndpoint {
	t.Helper()
	e := &listenerEndpoint{}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.got = append(e.got, received{body: body, auth: r.Header.Get("Authorization")})
		e.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(e.srv.Close)
	e.certFile = filepath.Join(t.TempDir(), "listener.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(e.certFile, pemBytes, 0o600))
	return e
}

func (e *listenerEndpoint) received() []received {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]received(nil), e.got...)
}

// Operator listeners (docs/PROTOCOL.md §15) through a real relay process: a listener configured in the
// environment registers a target over HTTP, a kind 9 mentioning it is
// published over WebSocket, and the listener's HTTPS endpoint receives the
// metadata-only body, signed by the relay key for its own URL. The relay
// trusts the endpoint's certificate only through SSL_CERT_FILE: TLS
// verification stays on.
func TestListenerDeliveryEndToEnd(t *testing.T) {
	t.Parallel()
	e := newListenerEndpoint(t)
	listener, target, author := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	sk := event.GenerateKey()
	const origin = "https://ops.example"
	env := externalEnv(t)
	env["BUZZ_OPERATOR_LISTENERS"] = listener.PubKey + ":" + e.srv.URL + "/hook"
	env["RELAY_OPERATOR_API_ORIGIN"] = origin
	env["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(sk)
	env["SSL_CERT_FILE"] = e.certFile
	p := startReady(t, env)

	// The services start beside the listeners, so the line may follow readiness.
	require.Eventually(t, func() bool {
		for _, rec := range p.logRecords() {
			if rec["msg"] == "operator-listener mention delivery worker started" {
				return rec["listeners"] == 1.0
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the worker start line with listeners=1:\n%s", p.Stdout)

	body := []byte(`{"pubkeys":["` + target.PubKey + `"]}`)
	sum := sha256.Sum256(body)
	tok := listener.Signed(t, auth.KindHTTPAuth, eventtest.Content(""), eventtest.Tag("u", origin+"/operator/listener/pubkeys"),
		eventtest.Tag("method", "POST"), eventtest.Tag("payload", hex.EncodeToString(sum[:])))
	req, err := http.NewRequest(http.MethodPost, "http://"+p.AppAddr+"/operator/listener/pubkeys", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", auth.NIP98Header(tok))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	w := authedPeer(t, p, "author", author)
	ch := createChannel(t, w, author)
	mention := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("p", target.PubKey), eventtest.Content("secret words"))
	w.mustPublish(mention)

	deadline := time.Now().Add(20 * time.Second)
	for len(e.received()) == 0 {
		require.True(t, time.Now().Before(deadline), "no notification reached the listener")
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a second delivery would arrive now
	got := e.received()
	require.Len(t, got, 1, "one registration, one notification")
	require.Equal(t, `{"v":1,"pubkey":"`+target.PubKey+`","community_host":"localhost:3000","event_id":"`+mention.ID+
		`","event_kind":9,"event_created_at":`+strconv.FormatInt(mention.CreatedAt, 10)+`}`, string(got[0].body),
		"metadata only: no content, author or channel")
	ev, err := auth.ParseNIP98Header(got[0].auth)
	require.NoError(t, err)
	require.True(t, ev.VerifySignature())
	require.Equal(t, event.PubKey(sk), ev.PubKey, "signed by the relay key")
	require.Equal(t, e.srv.URL+"/hook", ev.Tags.First("u").Value())
	payload := sha256.Sum256(got[0].body)
	require.Equal(t, hex.EncodeToString(payload[:]), ev.Tags.First("payload").Value())
	require.Positive(t, p.metric("buzz_operator_listener_enqueued_total"))
	require.Eventually(t, func() bool { return p.metric(`buzz_operator_listener_deliveries_total`) == 1 }, 5*time.Second, 50*time.Millisecond)
}
