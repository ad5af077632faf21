package relaytest

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// Request is one HTTP request to the relay's app listener. The zero value
// is POST to the deployment host with no Authorization.
type Request struct {
	// Host is the Host header; "" is the deployment host.
	Host string
	// Method defaults to POST.
	Method string
	Path   string
	Body   []byte
	// Key, when set and Authorization is empty, signs a fresh single-use
	// NIP-98 token for exactly this request: u = http://Host+Path, method.
	Key *eventtest.Key
	// Authorization, when set, is sent as is: a value from Token reused
	// (a replay), signed for another URL or method, or tampered with.
	Authorization string
	// Header holds other headers (Origin, Accept, X-Pubkey …).
	Header map[string]string
}

// Response is the relay's answer, body read in full.
type Response struct {
	Status int
	Body   []byte
	Header http.Header
}

// Do sends req to the relay and returns the status and body.
func (r *Relay) Do(t testing.TB, req Request) (int, []byte) {
	t.Helper()
	resp := r.Exchange(t, req)
	return resp.Status, resp.Body
}

// Exchange is Do returning the whole answer, headers included.
func (r *Relay) Exchange(t testing.TB, req Request) Response {
	t.Helper()
	host := req.Host
	if host == "" {
		host = r.Host
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	hr, err := http.NewRequest(method, "http://127.0.0.1:"+strconv.Itoa(r.Port)+req.Path, bytes.NewReader(req.Body))
	require.NoError(t, err)
	hr.Host = host
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	switch {
	case req.Authorization != "":
		hr.Header.Set("Authorization", req.Authorization)
	case req.Key != nil:
		hr.Header.Set("Authorization", Token(t, *req.Key, "http://"+host+req.Path, method))
	}
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// HTTP sends a bridge request for host ("" = the deployment host) with a
// fresh NIP-98 token signed by key (nil key: no Authorization). It returns
// the status and body.
func (r *Relay) HTTP(t testing.TB, host, method, path string, key *eventtest.Key, body []byte) (int, []byte) {
	t.Helper()
	return r.Do(t, Request{Host: host, Method: method, Path: path, Key: key, Body: body})
}

// PostEvent submits ev through POST /events on host with a NIP-98 token of
// signer and returns the status and body.
func (r *Relay) PostEvent(t testing.TB, host string, signer eventtest.Key, ev event.Event) (int, string) {
	t.Helper()
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	status, resp := r.HTTP(t, host, http.MethodPost, "/events", &signer, body)
	return status, string(resp)
}

// NIP98 returns a kind 27235 token event signed by key for u and method.
// A random nonce tag keeps two tokens of the same second distinct (ids
// are single-use); opts add tags or change created_at before signing.
func NIP98(t testing.TB, key eventtest.Key, u, method string, opts ...eventtest.Option) event.Event {
	t.Helper()
	base := []eventtest.Option{eventtest.Content(""), eventtest.Tag("u", u), eventtest.Tag("method", method),
		eventtest.Tag("nonce", rand.Text())}
	return key.Signed(t, event.KindNIP98, append(base, opts...)...)
}

// Token is the Authorization value of NIP98(t, key, u, method, opts...).
func Token(t testing.TB, key eventtest.Key, u, method string, opts ...eventtest.Option) string {
	t.Helper()
	return Authorization(NIP98(t, key, u, method, opts...))
}

// Authorization encodes a token event, as signed or altered after
// signing, as an Authorization value ("Nostr " + base64 JSON).
func Authorization(ev event.Event) string { return auth.NIP98Header(ev) }

// Metric scrapes the relay's /metrics and returns the value of one series,
// named with its labels as exposed (`name` or `name{label="v"}`); the test
// fails when the series is absent.
func (r *Relay) Metric(t testing.TB, series string) float64 {
	t.Helper()
	resp, err := http.Get(r.MetricsURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	require.FailNow(t, "no series "+series)
	return 0
}
