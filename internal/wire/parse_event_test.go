package wire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// eventObject is a well-formed event object (the signature is not checked
// by the parser).
var eventObject = `{"id":"` + strings.Repeat("a", 64) + `","pubkey":"` + strings.Repeat("b", 64) +
	`","created_at":1700000000,"kind":9,"tags":[["h","general"],["p","` + strings.Repeat("d", 64) + `"]],"content":"hi \u00e9 \"there\"","sig":"` + strings.Repeat("c", 128) + `"}`

// eventFrames are EVENT frames and near misses: white space JSON allows and
// white space it does not, other elements, another spelling of the type,
// broken objects and broken arrays.
func eventFrames() []string {
	o := eventObject
	return []string{
		`["EVENT",` + o + `]`,
		" \t\r\n[ \n\"EVENT\" \r, \t" + o + " \n] \r\n",
		"\f[\"EVENT\"," + o + "]",
		"[\"EVENT\"," + o + "]\v",
		"[\"EVENT\",\u00a0" + o + "]",
		`["EVENT",` + o + `,1]`,
		`["EVENT",` + o + `,` + o + `]`,
		`["EVENT",` + o + `]]`,
		`[["EVENT",` + o + `]]`,
		`["EVENT" ` + o + `]`,
		`["EVENT",,` + o + `]`,
		`["EVENTS",` + o + `]`,
		`["event",` + o + `]`,
		`["\u0045VENT",` + o + `]`,
		`["EVENT",` + o,
		`["EVENT",` + o + `}]`,
		`["EVENT",{` + o + `]`,
		`["EVENT",` + strings.Replace(o, `"kind":9`, `"kind":9,"kind":10`, 1) + `]`,
		`["EVENT",` + strings.Replace(o, `"kind":9,`, ``, 1) + `]`,
		`["EVENT",` + strings.Replace(o, `"kind":9`, `"kind":-1`, 1) + `]`,
		`["EVENT",` + strings.Replace(o, `"content":"hi`, "\"content\":\"\xff\xfe hi", 1) + `]`,
		`["EVENT",` + strings.Replace(o, `"tags":[`, `"tags":[[1],`, 1) + `]`,
		`["EVENT",` + strings.Replace(o, `"content":"hi`, `"content":"hi}`, 1) + `]`,
		`["EVENT",{}]`,
		`["EVENT",[]]`,
		`["EVENT"]`,
		`["EVENT",` + o + `] x`,
		`["AUTH",` + o + `]`,
		`["REQ","s",{"kinds":[1]}]`,
		`[]`,
		``,
	}
}

// TestParseEventSameAnswer: for every frame, ParseClient (which tries the
// EVENT path first) answers exactly what the general path answers: the
// same message, or the same error text.
func TestParseEventSameAnswer(t *testing.T) {
	t.Parallel()
	fast := 0
	for _, frame := range eventFrames() {
		b := []byte(frame)
		if _, ok := parseEvent(b); ok {
			fast++
		}
		sameAnswer(t, b)
	}
	// The plain frame, the one with JSON white space, a duplicate key, a
	// content with invalid UTF-8 and one with a brace in its content.
	require.Equal(t, 5, fast, "frames the EVENT path answers itself")
}

func sameAnswer(t *testing.T, b []byte) {
	t.Helper()
	got, gotErr := ParseClient(b)
	want, wantErr := parseClient(b)
	if wantErr != nil {
		require.Error(t, gotErr, "frame %q", b)
		require.Equal(t, wantErr.Error(), gotErr.Error(), "frame %q", b)
		return
	}
	require.NoError(t, gotErr, "frame %q", b)
	require.Equal(t, want, got, "frame %q", b)
}

// FuzzParseClientEvent: the EVENT path never answers differently from the
// general path (go test -fuzz FuzzParseClientEvent ./internal/wire explores).
func FuzzParseClientEvent(f *testing.F) {
	for _, frame := range eventFrames() {
		f.Add([]byte(frame))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAnswer(t, b)
	})
}

func BenchmarkParseClientEvent(b *testing.B) {
	frame := []byte(`["EVENT",` + eventObject + `]`)
	b.Run("event path", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseClient(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("general path", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseClient(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
}
