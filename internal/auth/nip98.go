package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// KindHTTPAuth is the kind of a NIP-98 event.
const KindHTTPAuth = 27235

// NIP98Window is the largest accepted distance between a NIP-98 event's
// created_at and the server clock, either way (docs/PROTOCOL.md §7.11).
const NIP98Window = 60 * time.Second

// Fixed NIP-98 messages of docs/PROTOCOL.md §8.2. The others carry values and are
// built by VerifyNIP98.
const (
	MsgNIP98Missing           = "missing Nostr auth"
	MsgNIP98Base64            = "invalid base64 in Nostr auth"
	MsgNIP98UTF8              = "invalid UTF-8 in Nostr auth"
	MsgNIP98JSON              = "invalid NIP-98 event JSON"
	MsgNIP98Signature         = "NIP-98: invalid Schnorr signature"
	MsgNIP98MissingURL        = "NIP-98: missing `u` tag"
	MsgNIP98MissingMethod     = "NIP-98: missing `method` tag"
	MsgNIP98Payload           = "NIP-98: payload tag SHA-256 mismatch: request body does not match signed hash"
	MsgNIP98Replay            = "NIP-98: replay detected"
	MsgNIP98ReplayUnavailable = "NIP-98: replay check unavailable"
)

const nip98Prefix = "Nostr "

// NIP98Error is a NIP-98 refusal. Message is the exact client message of
// docs/PROTOCOL.md §8.2; the bridge answers it as 401 {"error": Message}.
type NIP98Error struct{ Message string }

func (e *NIP98Error) Error() string { return e.Message }

func nip98Err(format string, args ...any) error {
	return &NIP98Error{Message: fmt.Sprintf(format, args...)}
}

// NIP98Request is what VerifyNIP98 checks a token against.
type NIP98Request struct {
	// Header is the whole Authorization header value ("" when absent).
	Header string
	// Method is the HTTP method of the request, e.g. "POST".
	Method string
	// Path is the request path as sent (r.URL.EscapedPath()).
	Path string
	// RawQuery is the query string without '?', "" when there is none.
	RawQuery string
	// Body is the exact request body, for the optional payload tag.
	Body []byte
	// TenantHost is the normalised host the request resolved with (docs/PROTOCOL.md §2.2).
	TenantHost string
	// Secure selects https (RELAY_URL is wss://) over http in the expected URL.
	Secure bool
	// Now is the server time; the zero value means time.Now().
	Now time.Time
}

// ExpectedURL returns the URL a token for r must name in its u tag:
// <http|https>://<tenant host><path>, plus ?<query> when there is one.
func (r *NIP98Request) ExpectedURL() string {
	scheme := "http"
	if r.Secure {
		scheme = "https"
	}
	u := scheme + "://" + r.TenantHost + r.Path
	if r.RawQuery != "" {
		u += "?" + r.RawQuery
	}
	return u
}

// VerifyNIP98 runs every check of docs/PROTOCOL.md §8.2 in table order, except the
// replay check: the caller records the returned event's id as used only
// after this succeeds, so a rejected token never burns its id. Errors are
// *NIP98Error carrying the exact client message. It has no side effects and
// may be called any number of times.
func VerifyNIP98(r NIP98Request) (event.Event, error) {
	ev, err := ParseNIP98Header(r.Header)
	if err != nil {
		return event.Event{}, err
	}
	if ev.Kind != KindHTTPAuth {
		return event.Event{}, nip98Err("NIP-98: expected kind %d, got %d", KindHTTPAuth, ev.Kind)
	}
	if _, ok := ev.CheckID(); !ok || !ev.VerifySignature() {
		return event.Event{}, &NIP98Error{Message: MsgNIP98Signature}
	}
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	delta := now.Unix() - ev.CreatedAt
	if delta < 0 {
		delta = -delta
	}
	if delta > int64(NIP98Window/time.Second) {
		return event.Event{}, nip98Err("NIP-98: event timestamp outside ±60s window (delta: %ds)", delta)
	}
	u := ev.Tags.First("u")
	if len(u) < 2 {
		return event.Event{}, &NIP98Error{Message: MsgNIP98MissingURL}
	}
	if !urlMatches(u[1], &r) {
		return event.Event{}, nip98Err("NIP-98: URL mismatch: event has `%s`, expected `%s`", u[1], r.ExpectedURL())
	}
	m := ev.Tags.First("method")
	if len(m) < 2 {
		return event.Event{}, &NIP98Error{Message: MsgNIP98MissingMethod}
	}
	if !strings.EqualFold(m[1], r.Method) {
		return event.Event{}, nip98Err("NIP-98: method mismatch: event has `%s`, expected `%s`", m[1], r.Method)
	}
	if p := ev.Tags.First("payload"); p != nil {
		sum := sha256.Sum256(r.Body)
		if len(p) < 2 || p[1] != hex.EncodeToString(sum[:]) {
			return event.Event{}, &NIP98Error{Message: MsgNIP98Payload}
		}
	}
	return ev, nil
}

// urlMatches applies the u-tag rule of docs/PROTOCOL.md §8.2: equal scheme, an
// authority that normalises to the tenant host, paths equal after removing
// one trailing '/', and byte-for-byte equal query strings.
func urlMatches(raw string, r *NIP98Request) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	want := "http"
	if r.Secure {
		want = "https"
	}
	if !strings.EqualFold(u.Scheme, want) {
		return false
	}
	if a := tenant.Normalize(u.Host); a == "" || a != r.TenantHost {
		return false
	}
	if strings.TrimSuffix(u.EscapedPath(), "/") != strings.TrimSuffix(r.Path, "/") {
		return false
	}
	return u.RawQuery == r.RawQuery
}

// ParseNIP98Header decodes an Authorization header value of the form
// "Nostr <standard base64 of an event's JSON>" into the event. It checks
// the shape of the event (event.Parse) but not its kind, id, signature or
// tags; VerifyNIP98 does. Errors are *NIP98Error with the messages of
// docs/PROTOCOL.md §8.2: missing Nostr auth, invalid base64 in Nostr auth, invalid
// UTF-8 in Nostr auth, invalid NIP-98 event JSON.
func ParseNIP98Header(h string) (event.Event, error) {
	token, ok := strings.CutPrefix(h, nip98Prefix)
	if !ok {
		return event.Event{}, &NIP98Error{Message: MsgNIP98Missing}
	}
	token = strings.TrimSpace(token)
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		// Some clients drop the padding; the alphabet is still the standard one.
		if raw, err = base64.RawStdEncoding.DecodeString(token); err != nil {
			return event.Event{}, &NIP98Error{Message: MsgNIP98Base64}
		}
	}
	if !utf8.Valid(raw) {
		return event.Event{}, &NIP98Error{Message: MsgNIP98UTF8}
	}
	ev, err := event.Parse(raw)
	if err != nil {
		return event.Event{}, &NIP98Error{Message: MsgNIP98JSON}
	}
	return ev, nil
}

// NIP98Header returns the Authorization header value for ev: "Nostr "
// followed by the standard, padded base64 of the event's JSON. Clients and
// tests use it; ParseNIP98Header reverses it.
func NIP98Header(ev event.Event) string {
	return nip98Prefix + base64.StdEncoding.EncodeToString(ev.AppendJSON(nil))
}
