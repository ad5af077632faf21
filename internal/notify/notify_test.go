package notify_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/notify"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// golden is the fixture of docs/PROTOCOL.md §15.6.
var golden = notify.Notification{
	Target:         strings.Repeat("ab", 32),
	CommunityHost:  "a.example",
	EventID:        strings.Repeat("cd", 32),
	EventKind:      9,
	EventCreatedAt: 1_700_000_000,
}

const goldenSHA256 = "02cfe6e22e6794de810106745d1cf0c2d9ae53dab933f9e37f156c243fb7da90"

func goldenBody() string {
	return `{"v":1,"pubkey":"` + strings.Repeat("ab", 32) + `","community_host":"a.example","event_id":"` +
		strings.Repeat("cd", 32) + `","event_kind":9,"event_created_at":1700000000}`
}

func TestBody(t *testing.T) {
	t.Parallel()
	b := notify.Body(golden)
	require.Equal(t, goldenBody(), string(b))
	require.Len(t, b, 235)
	sum := sha256.Sum256(b)
	require.Equal(t, goldenSHA256, hex.EncodeToString(sum[:]))

	t.Run("EscapesLikeJSON", func(t *testing.T) {
		t.Parallel()
		n := golden
		n.CommunityHost = "a\"b\\c"
		var got map[string]any
		require.NoError(t, json.Unmarshal(notify.Body(n), &got))
		require.Equal(t, "a\"b\\c", got["community_host"])
	})
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	want := map[int]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second,
		5: 16 * time.Second, 6: 32 * time.Second, 7: 64 * time.Second, 8: 128 * time.Second,
		9: 128 * time.Second, 50: 128 * time.Second, 0: time.Second, -3: time.Second,
	}
	for attempt, d := range want {
		require.Equal(t, d, notify.RetryDelay(attempt), "attempt %d", attempt)
	}
	require.Equal(t, 9, notify.MaxAttempts)
	var total time.Duration
	for a := 1; a < notify.MaxAttempts; a++ {
		total += notify.RetryDelay(a)
	}
	require.Equal(t, 255*time.Second, total, "the 9th POST starts ~255 s after the first")
}

func TestOutcomeKindString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "accepted", notify.Accepted.String())
	require.Equal(t, "retry", notify.Retry.String())
	require.Equal(t, "terminal", notify.Terminal.String())
	require.Equal(t, "unknown", notify.OutcomeKind(0).String())
}

// received is one request as the listener saw it.
type received struct {
	method, path, rawQuery, host string
	header                       http.Header
	body                         []byte
}

// listener is a real local TLS server standing for an operator listener.
type listener struct {
	srv      *httptest.Server
	requests chan received
	count    atomic.Int64
	release  chan struct{} // closed at cleanup: handlers that wait return
}

// newListener starts a TLS listener; answer writes the response after the
// request has been recorded.
func newListener(t *testing.T, answer func(l *listener, w http.ResponseWriter, r *http.Request)) *listener {
	t.Helper()
	l := &listener{requests: make(chan received, 100), release: make(chan struct{})}
	l.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(599)
			return
		}
		l.count.Add(1)
		l.requests <- received{method: r.Method, path: r.URL.EscapedPath(), rawQuery: r.URL.RawQuery,
			host: r.Host, header: r.Header.Clone(), body: body}
		answer(l, w, r)
	}))
	l.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake failures are expected in some tests
	l.srv.StartTLS()
	t.Cleanup(l.srv.Close)
	t.Cleanup(func() { close(l.release) }) // runs before Close
	return l
}

func status(code int) func(*listener, http.ResponseWriter, *http.Request) {
	return func(_ *listener, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// roots is a pool that trusts the test servers' certificate.
func roots(l *listener) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(l.srv.Certificate())
	return pool
}

func (l *listener) hook() string { return l.srv.URL + "/hook" }

func (l *listener) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-l.requests:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("listener received no request")
		return received{}
	}
}

// sendWithin runs Send and fails the test when it has not returned within
// limit. A stuck Send finishes once the test's listeners are released.
func sendWithin(t *testing.T, c *notify.Client, url string, limit time.Duration) (notify.Outcome, time.Duration) {
	t.Helper()
	type result struct {
		out  notify.Outcome
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		out := c.Send(context.Background(), url, golden)
		done <- result{out, time.Since(start)}
	}()
	select {
	case r := <-done:
		return r.out, r.took
	case <-time.After(limit):
		t.Fatalf("Send has not returned after %s", limit)
		return notify.Outcome{}, 0
	}
}

type testBundle struct {
	key    []byte
	client *notify.Client
}

func setup(t *testing.T, l *listener, timeout time.Duration) *testBundle {
	t.Helper()
	key := event.GenerateKey()
	c := notify.NewClient(timeout, key, notify.WithRootCAs(roots(l)))
	t.Cleanup(c.CloseIdleConnections)
	return &testBundle{key: key, client: c}
}

// verifyRequest checks one notification as a listener would, with the
// repository's NIP-98 verifier and an independent Nostr library.
func verifyRequest(t *testing.T, r received, sentTo string, relayPub string) event.Event {
	t.Helper()
	require.Equal(t, http.MethodPost, r.method)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, goldenBody(), string(r.body))

	h := r.header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Nostr ")
	require.True(t, ok, "Authorization %q", h)
	raw, err := base64.StdEncoding.Strict().DecodeString(token)
	require.NoError(t, err, "standard padded base64")
	require.Equal(t, token, base64.StdEncoding.EncodeToString(raw))

	ev, err := auth.ParseNIP98Header(h)
	require.NoError(t, err)
	require.Equal(t, auth.KindHTTPAuth, ev.Kind)
	require.Empty(t, ev.Content)
	_, idOK := ev.CheckID()
	require.True(t, idOK)
	require.True(t, ev.VerifySignature())
	require.Equal(t, relayPub, ev.PubKey)
	require.InDelta(t, time.Now().Unix(), ev.CreatedAt, 5)

	_, err = auth.VerifyNIP98(auth.NIP98Request{Header: h, Method: r.method, Path: r.path, RawQuery: r.rawQuery,
		Body: r.body, TenantHost: tenant.Normalize(r.host), Secure: true})
	require.NoError(t, err)

	var theirs nostr.Event
	require.NoError(t, json.Unmarshal(raw, &theirs))
	require.Equal(t, ev.ID, theirs.GetID())
	sigOK, err := theirs.CheckSignature()
	require.NoError(t, err)
	require.True(t, sigOK)

	sum := sha256.Sum256(r.body)
	require.Len(t, ev.Tags, 4)
	require.Equal(t, event.Tag{"u", sentTo}, ev.Tags[0])
	require.Equal(t, event.Tag{"method", "POST"}, ev.Tags[1])
	require.Equal(t, event.Tag{"payload", hex.EncodeToString(sum[:])}, ev.Tags[2])
	require.Equal(t, goldenSHA256, ev.Tags[2][1])
	require.Len(t, ev.Tags[3], 2)
	require.Equal(t, "nonce", ev.Tags[3][0])
	nonce, err := uuid.Parse(ev.Tags[3][1])
	require.NoError(t, err)
	require.Equal(t, uuid.Version(4), nonce.Version())
	require.Equal(t, uuid.RFC4122, nonce.Variant())
	require.Equal(t, nonce.String(), ev.Tags[3][1], "canonical lowercase form")
	return ev
}

func TestSendAccepted(t *testing.T) {
	t.Parallel()
	for _, code := range []int{200, 204} {
		t.Run("Status"+strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			l := newListener(t, status(code))
			bundle := setup(t, l, 5*time.Second)
			out := bundle.client.Send(context.Background(), l.hook(), golden)
			require.Equal(t, notify.Outcome{Kind: notify.Accepted, Status: code, Reason: "HTTP " + strconv.Itoa(code)}, out)
			verifyRequest(t, l.next(t), l.hook(), event.PubKey(bundle.key))
			require.EqualValues(t, 1, l.count.Load())
		})
	}
	t.Run("FreshAuthEventEachSend", func(t *testing.T) {
		t.Parallel()
		l := newListener(t, status(200))
		bundle := setup(t, l, 5*time.Second)
		pub := event.PubKey(bundle.key)
		for range 2 {
			require.Equal(t, notify.Accepted, bundle.client.Send(context.Background(), l.hook(), golden).Kind)
		}
		a, b := verifyRequest(t, l.next(t), l.hook(), pub), verifyRequest(t, l.next(t), l.hook(), pub)
		require.NotEqual(t, a.Tags[3][1], b.Tags[3][1], "nonce")
		require.NotEqual(t, a.ID, b.ID)
	})
}

func TestSendStatusClasses(t *testing.T) {
	t.Parallel()
	cases := map[int]notify.OutcomeKind{
		408: notify.Retry, 429: notify.Retry, 500: notify.Retry, 502: notify.Retry, 503: notify.Retry, 599: notify.Retry,
		400: notify.Terminal, 401: notify.Terminal, 403: notify.Terminal, 404: notify.Terminal, 410: notify.Terminal,
		304: notify.Terminal, 422: notify.Terminal,
	}
	for code, kind := range cases {
		t.Run("Status"+strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			l := newListener(t, status(code))
			bundle := setup(t, l, 5*time.Second)
			out := bundle.client.Send(context.Background(), l.hook(), golden)
			require.Equal(t, notify.Outcome{Kind: kind, Status: code, Reason: "HTTP " + strconv.Itoa(code)}, out)
			verifyRequest(t, l.next(t), l.hook(), event.PubKey(bundle.key))
			require.EqualValues(t, 1, l.count.Load(), "one POST per Send")
		})
	}
}

func TestSendRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run("Status"+strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			elsewhere := newListener(t, status(200))
			l := newListener(t, func(_ *listener, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", elsewhere.hook())
				w.WriteHeader(code)
			})
			bundle := setup(t, l, 5*time.Second) // the pool trusts elsewhere too: same test certificate
			out := bundle.client.Send(context.Background(), l.hook(), golden)
			require.Equal(t, notify.Outcome{Kind: notify.Terminal, Status: code, Reason: "HTTP " + strconv.Itoa(code)}, out)
			require.EqualValues(t, 1, l.count.Load())
			require.EqualValues(t, 0, elsewhere.count.Load(), "the Location is never contacted")
		})
	}
}

func TestSendTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	t.Run("NoAnswer", func(t *testing.T) {
		t.Parallel()
		// When the client gives up, the handler returns and net/http writes
		// an implicit 200, which the client can still read before its
		// connection is gone: Send must not count that as Accepted
		// (TestSendAnswerAfterGivingUp provokes that case).
		l := newListener(t, func(l *listener, _ http.ResponseWriter, r *http.Request) {
			select {
			case <-l.release:
			case <-r.Context().Done():
			}
		})
		bundle := setup(t, l, timeout)
		out, took := sendWithin(t, bundle.client, l.hook(), timeout+2*time.Second)
		require.Equal(t, notify.Retry, out.Kind)
		require.Zero(t, out.Status)
		require.Contains(t, out.Reason, "Client.Timeout exceeded")
		require.NotContains(t, out.Reason, l.srv.URL)
		require.GreaterOrEqual(t, took, timeout)
	})
	t.Run("NeverAccepted", func(t *testing.T) {
		t.Parallel()
		// A TCP listener that accepts and never speaks TLS.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					_ = c.Close()
				}
			}()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c)
			}
		}()
		t.Cleanup(func() { _ = ln.Close(); <-done })
		c := notify.NewClient(timeout, event.GenerateKey())
		t.Cleanup(c.CloseIdleConnections)
		out, took := sendWithin(t, c, "https://"+ln.Addr().String()+"/hook", timeout+2*time.Second)
		require.Equal(t, notify.Retry, out.Kind)
		require.Zero(t, out.Status)
		require.NotEmpty(t, out.Reason)
		require.GreaterOrEqual(t, took, timeout)
	})
	t.Run("StalledBodyWithinTimeout", func(t *testing.T) {
		t.Parallel()
		// Headers and part of a body arrive, then nothing: the whole-request
		// timeout covers the body read; the status already decided. The
		// headers must arrive within the timeout, TLS handshake included,
		// which takes longer than 300 ms on a loaded machine under -race.
		const timeout = 2 * time.Second
		l := newListener(t, func(l *listener, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			_, _ = w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
			select {
			case <-l.release:
			case <-r.Context().Done():
			}
		})
		bundle := setup(t, l, timeout)
		out, took := sendWithin(t, bundle.client, l.hook(), timeout+2*time.Second)
		require.Equal(t, notify.Outcome{Kind: notify.Accepted, Status: 200, Reason: "HTTP 200"}, out)
		require.GreaterOrEqual(t, took, timeout)
	})
}

func TestSendResponseBodyLimit(t *testing.T) {
	t.Parallel()
	const timeout = 20 * time.Second // far beyond what a bounded read takes
	t.Run("ExactlyTheLimitThenStall", func(t *testing.T) {
		t.Parallel()
		// One byte more read than the limit would wait for the timeout.
		l := newListener(t, func(l *listener, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(1<<30))
			w.WriteHeader(200)
			_, _ = w.Write(make([]byte, notify.MaxResponseBody))
			w.(http.Flusher).Flush()
			select {
			case <-l.release:
			case <-r.Context().Done():
			}
		})
		bundle := setup(t, l, timeout)
		out, _ := sendWithin(t, bundle.client, l.hook(), 5*time.Second)
		require.Equal(t, notify.Outcome{Kind: notify.Accepted, Status: 200, Reason: "HTTP 200"}, out)
		require.Equal(t, 64<<10, notify.MaxResponseBody)
	})
	t.Run("EndlessStreamIsCutOff", func(t *testing.T) {
		t.Parallel()
		writeErr := make(chan error, 1)
		l := newListener(t, func(l *listener, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(500)
			chunk := make([]byte, 16<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					writeErr <- err
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-l.release:
					return
				default:
				}
			}
		})
		bundle := setup(t, l, timeout)
		out, _ := sendWithin(t, bundle.client, l.hook(), 5*time.Second)
		require.Equal(t, notify.Outcome{Kind: notify.Retry, Status: 500, Reason: "HTTP 500"}, out)
		select {
		case err := <-writeErr:
			require.Error(t, err, "the client dropped the connection")
		case <-time.After(10 * time.Second):
			t.Fatal("the listener could still write: the connection was not dropped")
		}
	})
}

func TestSendTransportErrors(t *testing.T) {
	t.Parallel()
	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		c := notify.NewClient(time.Second, event.GenerateKey())
		t.Cleanup(c.CloseIdleConnections)
		out := c.Send(context.Background(), "https://"+addr+"/hook", golden)
		require.Equal(t, notify.Retry, out.Kind)
		require.Zero(t, out.Status)
		require.Contains(t, out.Reason, "connection refused")
		require.NotContains(t, out.Reason, "/hook")
	})
	t.Run("ReasonCarriesNoURL", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		c := notify.NewClient(time.Second, event.GenerateKey())
		t.Cleanup(c.CloseIdleConnections)
		out := c.Send(context.Background(), "https://user:hunter2@"+addr+"/hook?token=sekrit", golden)
		require.Equal(t, notify.Retry, out.Kind)
		for _, s := range []string{"user", "hunter2", "token", "sekrit", "/hook"} {
			require.NotContains(t, out.Reason, s)
		}
	})
	t.Run("UntrustedCertificate", func(t *testing.T) {
		t.Parallel()
		l := newListener(t, status(200))
		c := notify.NewClient(5*time.Second, event.GenerateKey()) // system roots only
		t.Cleanup(c.CloseIdleConnections)
		out := c.Send(context.Background(), l.hook(), golden)
		require.Equal(t, notify.Retry, out.Kind)
		require.Zero(t, out.Status)
		require.Contains(t, out.Reason, "x509")
		require.Contains(t, out.Reason, "certificate")
		require.EqualValues(t, 0, l.count.Load(), "nothing reaches an unverified server")
	})
	t.Run("CanceledContext", func(t *testing.T) {
		t.Parallel()
		l := newListener(t, status(200))
		bundle := setup(t, l, 5*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out := bundle.client.Send(ctx, l.hook(), golden)
		require.Equal(t, notify.Retry, out.Kind)
		require.Zero(t, out.Status)
		require.Contains(t, out.Reason, "context canceled")
	})
}

func TestSendCannotBuild(t *testing.T) {
	t.Parallel()
	t.Run("Encoding", func(t *testing.T) {
		t.Parallel()
		cases := map[string]func(*notify.Notification){
			"UppercaseTarget": func(n *notify.Notification) { n.Target = strings.Repeat("AB", 32) },
			"ShortTarget":     func(n *notify.Notification) { n.Target = "abab" },
			"BadEventID":      func(n *notify.Notification) { n.EventID = strings.Repeat("zz", 32) },
			"EmptyHost":       func(n *notify.Notification) { n.CommunityHost = "" },
		}
		for name, edit := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				l := newListener(t, status(200))
				bundle := setup(t, l, 5*time.Second)
				n := golden
				edit(&n)
				out := bundle.client.Send(context.Background(), l.hook(), n)
				require.Equal(t, notify.Terminal, out.Kind)
				require.Zero(t, out.Status)
				require.True(t, strings.HasPrefix(out.Reason, "notification encoding failed: "), out.Reason)
				require.EqualValues(t, 0, l.count.Load())
			})
		}
	})
	t.Run("BadURL", func(t *testing.T) {
		t.Parallel()
		c := notify.NewClient(time.Second, event.GenerateKey())
		out := c.Send(context.Background(), "https://a.example/\x7f?token=sekrit", golden)
		require.Equal(t, notify.Terminal, out.Kind)
		require.Zero(t, out.Status)
		require.True(t, strings.HasPrefix(out.Reason, "notification encoding failed: "), out.Reason)
		require.NotContains(t, out.Reason, "sekrit")
	})
	t.Run("Auth", func(t *testing.T) {
		t.Parallel()
		l := newListener(t, status(200))
		c := notify.NewClient(5*time.Second, make([]byte, 31), notify.WithRootCAs(roots(l)))
		t.Cleanup(c.CloseIdleConnections)
		out := c.Send(context.Background(), l.hook(), golden)
		require.Equal(t, notify.Terminal, out.Kind)
		require.Zero(t, out.Status)
		require.True(t, strings.HasPrefix(out.Reason, "notification auth failed: "), out.Reason)
		require.EqualValues(t, 0, l.count.Load())
	})
}
