package event_test

import (
	"strings"
	"testing"

	"github.com/buzz-relay/buzz/internal/event"
)

// BenchmarkAppendJSON encodes a kind 9 channel message of about 400 bytes
// with a channel tag and two mentions (docs/PERFORMANCE.md "Fan-out encodes
// only for a taker").
func BenchmarkAppendJSON(b *testing.B) {
	sk := event.GenerateKey()
	ev := event.Event{Kind: 9, CreatedAt: 1767225600, Content: strings.Repeat("a chat message ", 10),
		Tags: event.Tags{{"h", "0b8f6a4e-2a49-4d7b-9d6e-3f1c2b7a9e10"}, {"p", strings.Repeat("ab", 32)}, {"p", strings.Repeat("cd", 32)}}}
	if err := ev.Sign(sk); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(ev.AppendJSON(nil))
	}
	b.ReportMetric(float64(n), "bytes")
}
