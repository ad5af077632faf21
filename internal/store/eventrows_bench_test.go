package store

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/buzz-relay/buzz/internal/event"
)

// BenchmarkRowJSON is the Go side of one stored row becoming wire JSON,
// from the bytes the driver hands over: Decode is the decode of the tags
// and the encode of the event (the read path before EventRow), Raw is
// EventRow.build. The row has the benchmark workload's tags (one e, one p,
// one t) and an escaped content.
func BenchmarkRowJSON(b *testing.B) {
	id, pub, sig := make([]byte, 32), make([]byte, 32), make([]byte, 64)
	for i := range sig {
		sig[i] = byte(i * 7)
	}
	copy(id, sig[3:])
	copy(pub, sig[9:])
	tags := []byte(`[["e", "` + strings.Repeat("ab", 32) + `", "", "root"], ["p", "` + strings.Repeat("cd", 32) +
		`"], ["t", "bench"]]`)
	content := "reply 42: \"quoted\"\nsecond line — ünïcødé <b>&</b>"
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev := event.Event{ID: hex.EncodeToString(id), PubKey: hex.EncodeToString(pub), Sig: hex.EncodeToString(sig),
				CreatedAt: 1_700_000_000, Kind: 1, Content: content}
			if err := json.Unmarshal(tags, &ev.Tags); err != nil {
				b.Fatal(err)
			}
			_ = ev.AppendJSON(nil)
		}
	})
	b.Run("Raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := EventRow{Event: event.Event{CreatedAt: 1_700_000_000, Kind: 1, Content: content}}
			if err := r.build(id, pub, sig, tags); err != nil {
				b.Fatal(err)
			}
		}
	})
}
