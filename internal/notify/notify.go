package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
)

// MaxAttempts is the most POSTs one outbox row gets (docs/PROTOCOL.md §15.7): a
// retryable failure on attempt MaxAttempts is terminal.
const MaxAttempts = 9

// MaxResponseBody is how many bytes of a response body Send reads (and
// discards) at most; the connection is dropped rather than read further.
const MaxResponseBody = 64 << 10

// maxRetryShift caps the exponent of RetryDelay: 2^7 s = 128 s.
const maxRetryShift = 7

// Notification is what one delivery tells a listener: metadata only, never
// the event's content, author, channel or other tags.
type Notification struct {
	// Target is the lowercase hex pubkey that was mentioned.
	Target string
	// CommunityHost is the primary host of the event's community
	// (communities.host); the companion fetches the event from there.
	CommunityHost string
	// EventID is the lowercase hex id of the mentioning event.
	EventID string
	// EventKind is the mentioning event's kind.
	EventKind int
	// EventCreatedAt is the author's created_at, unix seconds.
	EventCreatedAt int64
}

// Body returns the exact JSON body of docs/PROTOCOL.md §15.6: compact, fields in the
// order v, pubkey, community_host, event_id, event_kind, event_created_at.
// It encodes whatever n holds (strings with the NIP-01 JSON escaping) and
// never fails; Send checks n's fields before it sends anything.
func Body(n Notification) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"v":1,"pubkey":`...)
	b = event.AppendString(b, n.Target)
	b = append(b, `,"community_host":`...)
	b = event.AppendString(b, n.CommunityHost)
	b = append(b, `,"event_id":`...)
	b = event.AppendString(b, n.EventID)
	b = append(b, `,"event_kind":`...)
	b = strconv.AppendInt(b, int64(n.EventKind), 10)
	b = append(b, `,"event_created_at":`...)
	b = strconv.AppendInt(b, n.EventCreatedAt, 10)
	return append(b, '}')
}

// check reports why n cannot be encoded as a notification, or nil.
func (n Notification) check() error {
	switch {
	case !event.IsHex64(n.Target):
		return errors.New("target pubkey is not 64 lowercase hex characters")
	case !event.IsHex64(n.EventID):
		return errors.New("event id is not 64 lowercase hex characters")
	case n.CommunityHost == "":
		return errors.New("community host is empty")
	}
	return nil
}

// OutcomeKind classifies one delivery attempt. The zero value is no class.
type OutcomeKind int

// The outcome classes of docs/PROTOCOL.md §15.7.
const (
	// Accepted is a 2xx answer: the row is complete.
	Accepted OutcomeKind = iota + 1
	// Retry is 408, 429, any 5xx or a transport error: retry the row
	// after RetryDelay, or fail it once MaxAttempts is reached.
	Retry
	// Terminal is any other status (3xx and the other 4xx included) or a
	// notification that could not be built: delete the row, never retry.
	Terminal
)

// String returns "accepted", "retry" or "terminal" (or "unknown").
func (k OutcomeKind) String() string {
	switch k {
	case Accepted:
		return "accepted"
	case Retry:
		return "retry"
	case Terminal:
		return "terminal"
	}
	return "unknown"
}

// Outcome is the classified result of one Send.
type Outcome struct {
	// Kind is the class: Accepted, Retry or Terminal.
	Kind OutcomeKind
	// Status is the HTTP status the listener answered, 0 when no answer
	// arrived (transport error), when the answer only began to arrive after
	// the request had been given up (timeout or canceled context), or when
	// nothing was sent (encoding failure).
	Status int
	// Reason says why: "HTTP <status>", the transport error text (never the
	// listener URL), "HTTP <status> arrived after …" for a late answer,
	// "notification encoding failed: …" or "notification auth failed: …".
	Reason string
}

// RetryDelay returns how long to wait after failed attempt number attempt
// (1 on the first send) before the next one: 2^min(attempt−1, 7) seconds,
// so 1 s, 2 s, 4 s … 128 s. An attempt below 1 counts as 1. It does not
// apply MaxAttempts; the caller fails the row once attempt >= MaxAttempts.
func RetryDelay(attempt int) time.Duration {
	shift := min(max(attempt, 1)-1, maxRetryShift)
	return time.Duration(1<<shift) * time.Second
}

// Option changes how NewClient builds a Client.
type Option func(*options)

type options struct {
	rootCAs *x509.CertPool
}

// WithRootCAs makes the Client verify listener certificates against pool
// instead of the system roots. Verification stays on; a nil pool keeps the
// system roots. Tests pass the pool of their local TLS server.
func WithRootCAs(pool *x509.CertPool) Option {
	return func(o *options) { o.rootCAs = pool }
}

// Client sends notifications to operator listeners. It owns a dedicated
// http.Client that no other component shares: timeout bounds the whole
// request (connect, TLS, response headers and body read), certificates are
// verified, and redirects are never followed. It is safe for concurrent use.
type Client struct {
	http *http.Client
	key  []byte
}

// NewClient returns a Client that signs its auth events with relayKey, the
// relay's 32-byte secret key. A key that cannot sign is not refused here:
// every Send then returns a Terminal "notification auth failed: …" outcome.
// Proxy settings come from the environment (HTTPS_PROXY, NO_PROXY).
func NewClient(timeout time.Duration, relayKey []byte, opts ...Option) *Client {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: o.rootCAs, MinVersion: tls.VersionTLS12}
	tr.MaxIdleConnsPerHost = 10 // a worker turn delivers up to 10 rows at once
	return &Client{
		http: &http.Client{
			Transport: tr,
			Timeout:   timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a 3xx is the answer; its Location is never contacted
			},
		},
		key: append([]byte(nil), relayKey...),
	}
}

// CloseIdleConnections closes the Client's idle keep-alive connections.
// The Client stays usable.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Send POSTs n to listenerURL, the listener's normalized URL (also the NIP-98 u
// tag), with a fresh relay-signed auth event, and classifies the answer
// (docs/PROTOCOL.md §15.7). It reads at most MaxResponseBody bytes of the response
// and discards them. Once the status line has arrived, the status decides
// the outcome even if reading the body then fails. An answer whose first
// byte arrived only after the request had been given up (the timeout passed
// or ctx ended) is Retry whatever its status: giving up closes the
// connection, but an answer that arrives before the close takes effect can
// still be read, such as the implicit 200 a Go handler sends when it
// returns on its request context's end, so such a status says nothing
// about the notification. Nothing is sent when the body or auth event
// cannot be built. It may be called concurrently.
func (c *Client) Send(ctx context.Context, listenerURL string, n Notification) Outcome {
	if err := n.check(); err != nil {
		return Outcome{Kind: Terminal, Reason: "notification encoding failed: " + err.Error()}
	}
	body := Body(n)
	authz, err := c.authorization(listenerURL, body)
	if err != nil {
		return Outcome{Kind: Terminal, Reason: "notification auth failed: " + err.Error()}
	}
	var late lateAnswer
	if c.http.Timeout > 0 {
		// Earlier than the deadline Do sets itself, so every answer that
		// arrives after that one has passed counts as late.
		late.deadline = time.Now().Add(c.http.Timeout)
	}
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotFirstResponseByte: func() { late.check(ctx) },
	})
	req, err := http.NewRequestWithContext(traced, http.MethodPost, listenerURL, bytes.NewReader(body))
	if err != nil {
		// The parser's error quotes the URL; the reason must not.
		return Outcome{Kind: Terminal, Reason: "notification encoding failed: listener URL is not a valid request URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", authz)
	resp, err := c.http.Do(req)
	if err != nil {
		return Outcome{Kind: Retry, Reason: transportReason(err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBody))
	_ = resp.Body.Close() // unread bytes beyond the limit drop the connection
	if reason := late.reason(); reason != "" {
		return Outcome{Kind: Retry, Reason: "HTTP " + strconv.Itoa(resp.StatusCode) + " arrived after " + reason}
	}
	return classify(resp.StatusCode)
}

// lateAnswer records whether the first byte of an answer arrived after its
// request had been given up.
type lateAnswer struct {
	deadline time.Time              // zero: no timeout
	why      atomic.Pointer[string] // set at the first response byte when late
}

// check runs when the first response byte arrives (on the transport's
// goroutine).
func (l *lateAnswer) check(ctx context.Context) {
	var why string
	switch {
	case ctx.Err() != nil:
		why = context.Cause(ctx).Error()
	case !l.deadline.IsZero() && !time.Now().Before(l.deadline):
		why = "Client.Timeout exceeded"
	default:
		return
	}
	l.why.Store(&why)
}

// reason is why the answer was late, or "" when it was not.
func (l *lateAnswer) reason() string {
	if p := l.why.Load(); p != nil {
		return *p
	}
	return ""
}

// authorization builds the Authorization value for a POST of body to u.
func (c *Client) authorization(u string, body []byte) (string, error) {
	nonce, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("generate nonce: %w", err)
	}
	sum := sha256.Sum256(body)
	ev := event.Event{
		CreatedAt: time.Now().Unix(),
		Kind:      auth.KindHTTPAuth,
		Tags: event.Tags{
			{"u", u},
			{"method", http.MethodPost},
			{"payload", hex.EncodeToString(sum[:])},
			{"nonce", nonce.String()},
		},
	}
	if err := ev.Sign(c.key); err != nil {
		return "", err
	}
	return auth.NIP98Header(ev), nil
}

// classify maps an HTTP status to its outcome class.
func classify(status int) Outcome {
	o := Outcome{Status: status, Reason: "HTTP " + strconv.Itoa(status)}
	switch {
	case status >= 200 && status <= 299:
		o.Kind = Accepted
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500 && status <= 599:
		o.Kind = Retry
	default:
		o.Kind = Terminal
	}
	return o
}

// transportReason is the text of a failed round trip without the request
// URL that net/http wraps around it (the URL could in principle carry a
// query or credentials).
func transportReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	return err.Error()
}
