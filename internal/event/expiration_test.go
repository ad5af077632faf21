package event

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExpiration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		tags    Tags
		at      int64
		present bool
		ok      bool
	}{
		{"none", Tags{{"p", "x"}}, 0, false, true},
		{"plain", Tags{{"expiration", "1700000000"}}, 1700000000, true, true},
		{"extra elements", Tags{{"expiration", "5", "x"}}, 5, true, true},
		{"zero", Tags{{"expiration", "0"}}, 0, true, true},
		{"twelve digits", Tags{{"expiration", "999999999999"}}, 999999999999, true, true},
		{"milliseconds", Tags{{"expiration", "1700000000000"}}, 0, true, false},
		{"no value", Tags{{"expiration"}}, 0, true, false},
		{"empty", Tags{{"expiration", ""}}, 0, true, false},
		{"sign", Tags{{"expiration", "+17"}}, 0, true, false},
		{"negative", Tags{{"expiration", "-17"}}, 0, true, false},
		{"fraction", Tags{{"expiration", "17.5"}}, 0, true, false},
		{"space", Tags{{"expiration", " 17"}}, 0, true, false},
		{"two tags", Tags{{"expiration", "17"}, {"expiration", "18"}}, 0, true, false},
		{"other tag holding the word", Tags{{"t", "expiration"}}, 0, false, true},
	}
	for _, c := range cases {
		ev := Event{Tags: c.tags}
		at, present, ok := ev.Expiration()
		require.Equal(t, c.present, present, c.name)
		require.Equal(t, c.ok, ok, c.name)
		require.Equal(t, c.at, at, c.name)
	}
}
