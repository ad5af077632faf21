package windowbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/window"
)

// kindBounds is the thread bounds event.
const kindBounds = 39007

// windowClient sends thread-window pages to one community of the relay
// over HTTP on loopback, each with a fresh NIP-98 header.
type windowClient struct {
	hc  *http.Client
	url string // http://<host>/query, the URL the NIP-98 token names
	sk  []byte
}

// newWindowClient dials addr whatever the URL's host, so the Host header
// and the signed URL name the community while the bytes stay on loopback.
func newWindowClient(addr, host string, sk []byte) *windowClient {
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 4,
	}
	return &windowClient{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, url: "http://" + host + "/query",
		sk: sk}
}

func (c *windowClient) close() { c.hc.CloseIdleConnections() }

// page is one thread window answer.
type page struct {
	Status int
	// Error is the body's error text of a non-200 answer.
	Error   string
	Rows    []window.Cursor
	HasMore bool
	Next    *window.Cursor
	// Took is the exchange, from sending the request to the last byte of
	// the answer; the NIP-98 signing before it is not counted.
	Took time.Duration
}

// windowFilter is the benchmark's page of root: limit 50, depth 100, kinds
// [9,40002], no aux, after cursor when set.
func windowFilter(channel, root string, cursor *window.Cursor) []byte {
	f := map[string]any{"thread_window": true, "#h": []string{channel}, "#e": []string{root},
		"kinds": pageKinds, "limit": pageLimit, "depth_limit": pageDepth}
	if cursor != nil {
		f["until"], f["before_id"] = cursor.CreatedAt, cursor.ID
	}
	b, _ := json.Marshal([]any{f})
	return b
}

// fetch posts one page. A non-200 answer is a page with its status and
// error text, not an error; an error is a transport failure or an answer
// that does not have the bounds event's shape.
func (c *windowClient) fetch(ctx context.Context, channel, root string, cursor *window.Cursor) (page, error) {
	body := windowFilter(channel, root, cursor)
	auth, err := client.NIP98Header(c.sk, http.MethodPost, c.url, body)
	if err != nil {
		return page{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return page{}, err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return page{}, fmt.Errorf("POST /query: %w", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := page{Status: resp.StatusCode, Took: time.Since(t0)}
	if err != nil {
		return p, fmt.Errorf("POST /query: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		p.Error = e.Error
		return p, nil
	}
	return p, parsePage(b, &p)
}

// parsePage reads an answer: reply rows, then exactly one 39007 whose
// content carries has_more and next_cursor.
func parsePage(b []byte, p *page) error {
	var evs []struct {
		ID        string     `json:"id"`
		CreatedAt int64      `json:"created_at"`
		Kind      int        `json:"kind"`
		Content   string     `json:"content"`
		Tags      [][]string `json:"tags"`
	}
	if err := json.Unmarshal(b, &evs); err != nil {
		return fmt.Errorf("POST /query: decode answer: %w", err)
	}
	if len(evs) == 0 || evs[len(evs)-1].Kind != kindBounds {
		return fmt.Errorf("POST /query: answer of %d events does not end with a kind %d bounds event", len(evs), kindBounds)
	}
	var bounds struct {
		HasMore *bool `json:"has_more"`
		Next    *struct {
			CreatedAt int64  `json:"created_at"`
			ID        string `json:"id"`
		} `json:"next_cursor"`
	}
	last := evs[len(evs)-1]
	if err := json.Unmarshal([]byte(last.Content), &bounds); err != nil || bounds.HasMore == nil {
		return fmt.Errorf("POST /query: bounds content %q has no has_more", last.Content)
	}
	p.HasMore = *bounds.HasMore
	if bounds.Next != nil {
		p.Next = &window.Cursor{CreatedAt: bounds.Next.CreatedAt, ID: bounds.Next.ID}
	}
	if p.HasMore != (p.Next != nil) {
		return errors.New("POST /query: next_cursor must be null exactly when has_more is false")
	}
	for _, ev := range evs[:len(evs)-1] {
		if ev.Kind == kindBounds {
			return errors.New("POST /query: more than one bounds event")
		}
		p.Rows = append(p.Rows, window.Cursor{CreatedAt: ev.CreatedAt, ID: ev.ID})
	}
	return nil
}
