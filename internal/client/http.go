package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// MaxResponseBytes bounds a bridge response the client reads.
const MaxResponseBytes = 64 << 20

// HTTP is a client of the relay's HTTP bridge. Every request carries a fresh
// NIP-98 header signed with SK (or given by Authorize). The zero Client means http.DefaultClient. An
// HTTP value is safe for concurrent use.
type HTTP struct {
	// BaseURL is the bridge's origin, e.g. http://localhost:3000 (no trailing path).
	BaseURL string
	// SK is the 32-byte secret key that signs the NIP-98 headers.
	SK []byte
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
	// Host, when set, reaches a community whose host is not BaseURL's, as
	// when several communities share one relay on 127.0.0.1:PORT: requests
	// still go to BaseURL, but each carries Host: Host and its NIP-98 u tag
	// is the request URL with its host (and port) replaced by Host, because
	// the relay checks u against the tenant host the request resolved to.
	// Host is used verbatim, so it carries its own port when the community
	// has one. "" means BaseURL's host for both.
	Host string
	// Authorize, when set, gives each request's Authorization value for
	// its method, signed URL and body instead of a header signed with SK
	// as the request is sent: a load tool uses it to sign its tokens ahead
	// of a measured window. It returns "" to let SK sign.
	Authorize func(method, url string, body []byte) string
}

// Publish posts ev to /events. accepted and msg are the bridge's answer; a
// non-2xx answer is a *RefusedError with the status and the JSON "error".
func (h *HTTP) Publish(ctx context.Context, ev event.Event) (accepted bool, msg string, err error) {
	var out struct {
		EventID  string `json:"event_id"`
		Accepted bool   `json:"accepted"`
		Message  string `json:"message"`
	}
	if err := h.post(ctx, "/events", ev.AppendJSON(nil), &out); err != nil {
		return false, "", err
	}
	return out.Accepted, out.Message, nil
}

// Query posts the filters to /query and returns the events in the order the
// bridge sent them. A non-2xx answer is a *RefusedError.
func (h *HTTP) Query(ctx context.Context, filters ...event.Filter) ([]event.Event, error) {
	var raw []json.RawMessage
	if err := h.post(ctx, "/query", filtersJSON(filters), &raw); err != nil {
		return nil, err
	}
	events := make([]event.Event, 0, len(raw))
	for i, r := range raw {
		ev, err := event.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("POST /query: event %d: %w", i, err)
		}
		events = append(events, ev)
	}
	return events, nil
}

// Count posts the filters to /count and returns the count. A non-2xx answer
// is a *RefusedError.
func (h *HTTP) Count(ctx context.Context, filters ...event.Filter) (int64, error) {
	var out struct {
		Count *int64 `json:"count"`
	}
	if err := h.post(ctx, "/count", filtersJSON(filters), &out); err != nil {
		return 0, err
	}
	if out.Count == nil {
		return 0, fmt.Errorf("POST /count: answer has no count")
	}
	return *out.Count, nil
}

// Token signs, with SK, the NIP-98 header of a POST of body to path as
// the bridge will check it, created at at (see NIP98HeaderAt).
func (h *HTTP) Token(path string, body []byte, at time.Time) (string, error) {
	return NIP98HeaderAt(h.SK, http.MethodPost, h.signedURL(path), body, at)
}

// signedURL is the URL a request to path signs in its u tag: BaseURL's,
// with Host in place of its host when set.
func (h *HTTP) signedURL(path string) string {
	raw := strings.TrimSuffix(h.BaseURL, "/") + path
	if h.Host == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw // the request itself then fails to build, with this error
	}
	u.Host = h.Host
	return u.String()
}

// FiltersJSON is the body /query and /count send for filters.
func FiltersJSON(filters []event.Filter) []byte { return filtersJSON(filters) }

func filtersJSON(filters []event.Filter) []byte {
	b := []byte{'['}
	for i := range filters {
		if i > 0 {
			b = append(b, ',')
		}
		b = filters[i].AppendJSON(b)
	}
	return append(b, ']')
}

// post sends body to path with a NIP-98 header and decodes a 2xx answer into out.
func (h *HTTP) post(ctx context.Context, path string, body []byte, out any) error {
	op := "POST " + path
	url := strings.TrimSuffix(h.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if h.Host != "" {
		req.Host = h.Host
	}
	signed := h.signedURL(path)
	var auth string
	if h.Authorize != nil {
		auth = h.Authorize(http.MethodPost, signed, body)
	}
	if auth == "" {
		if auth, err = NIP98Header(h.SK, http.MethodPost, signed, body); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	hc := h.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
			if e.Message != "" {
				msg += ": " + e.Message
			}
		}
		return &RefusedError{Op: op, Status: resp.StatusCode, Message: msg}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: decode answer: %w", op, err)
	}
	return nil
}
