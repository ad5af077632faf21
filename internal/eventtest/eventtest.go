// Package eventtest builds keys and signed events for tests. TEST ONLY: it is
// imported from _test.go files and test helpers, never from production code.
package eventtest

import (
	"testing"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// Key is a test identity.
type Key struct {
	SK     []byte
	PubKey string
}

// NewKey returns a fresh random key.
func NewKey() Key {
	sk := event.GenerateKey()
	return Key{SK: sk, PubKey: event.PubKey(sk)}
}

// Option changes an event before it is signed.
type Option func(*event.Event)

// Tag appends a tag.
func Tag(t ...string) Option { return func(e *event.Event) { e.Tags = append(e.Tags, event.Tag(t)) } }

// Content sets the content.
func Content(s string) Option { return func(e *event.Event) { e.Content = s } }

// At sets created_at.
func At(ts int64) Option { return func(e *event.Event) { e.CreatedAt = ts } }

// Channel adds an ["h", id] tag.
func Channel(id string) Option { return Tag("h", id) }

// Signed returns an event of kind signed by k, created now, with content
// "hello" unless an option changes it.
func (k Key) Signed(t testing.TB, kind int, opts ...Option) event.Event {
	t.Helper()
	ev := event.Event{Kind: kind, CreatedAt: time.Now().Unix(), Content: "hello", Tags: event.Tags{}}
	for _, o := range opts {
		o(&ev)
	}
	if err := ev.Sign(k.SK); err != nil {
		t.Fatalf("sign: %v", err)
	}
	return ev
}
