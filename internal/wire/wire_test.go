package wire_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/wire"
)

func TestParseClientErrors(t *testing.T) {
	t.Parallel()
	ev := eventtest.NewKey().Signed(t, 1)
	long := strings.Repeat("s", 257)
	cases := []struct{ name, in, want string }{
		{"NotJSON", `not json`, "JSON parse error: "},
		{"NotArray", `{"a":1}`, "expected JSON array"},
		{"Empty", `[]`, "empty array"},
		{"FirstNotString", `[1]`, "first element must be a string"},
		{"Unknown", `["PING"]`, "unknown message type: PING"},
		{"EventMissing", `["EVENT"]`, "EVENT requires event object"},
		{"EventBad", `["EVENT",{"id":1}]`, "invalid event: "},
		{"ReqNoSub", `["REQ"]`, "REQ requires sub_id"},
		{"ReqSubNotString", `["REQ",5]`, "REQ sub_id must be a string"},
		{"ReqSubEmpty", `["REQ",""]`, "REQ sub_id must not be empty"},
		{"ReqSubLong", `["REQ","` + long + `"]`, "REQ sub_id exceeds maximum length of 256 bytes"},
		{"ReqTooMany", `["REQ","s"` + strings.Repeat(",{}", 11) + `]`, "REQ contains 11 filters, maximum is 10"},
		{"ReqBadFilter", `["REQ","s",{"kinds":["x"]}]`, "invalid filter: "},
		{"CountNoSub", `["COUNT"]`, "COUNT requires sub_id"},
		{"CountTooMany", `["COUNT","s"` + strings.Repeat(",{}", 11) + `]`, "COUNT contains 11 filters, maximum is 10"},
		{"CloseNoSub", `["CLOSE"]`, "CLOSE requires sub_id"},
		{"CloseSubNotString", `["CLOSE",{}]`, "CLOSE sub_id must be a string"},
		{"AuthMissing", `["AUTH"]`, "AUTH requires event object"},
		{"AuthBad", `["AUTH",{"kind":"x"}]`, "invalid auth event: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := wire.ParseClient([]byte(tc.in))
			var pe *wire.ParseError
			require.ErrorAs(t, err, &pe)
			require.True(t, strings.HasPrefix(pe.Notice(), "invalid message: Invalid message format: "+tc.want), pe.Notice())
		})
	}
	t.Run("ValidEvent", func(t *testing.T) {
		t.Parallel()
		msg, err := wire.ParseClient(append(append([]byte(`["EVENT",`), ev.AppendJSON(nil)...), ']'))
		require.NoError(t, err)
		require.Equal(t, ev, msg.Event)
	})
	t.Run("PeekEventID", func(t *testing.T) {
		t.Parallel()
		frame := append(append([]byte(`["EVENT",`), ev.AppendJSON(nil)...), ']')
		require.Equal(t, ev.ID, wire.PeekEventID(frame))
		require.Equal(t, "", wire.PeekEventID([]byte(`["REQ","x"]`)))
	})
}

func FuzzClientMessage(f *testing.F) {
	f.Add([]byte(`["REQ","s1",{"kinds":[9],"#h":["general"],"limit":50}]`))
	f.Add([]byte(`["CLOSE","s1"]`))
	f.Add([]byte(`["COUNT","c",{"authors":["` + strings.Repeat("a", 64) + `"]}]`))
	f.Add([]byte(`["EVENT",{"id":"` + strings.Repeat("a", 64) + `","pubkey":"` + strings.Repeat("b", 64) + `","created_at":1,"kind":1,"tags":[["p","x"]],"content":"hi","sig":"` + strings.Repeat("c", 128) + `"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := wire.ParseClient(b)
		if err != nil {
			return
		}
		again, err := wire.ParseClient(msg.AppendJSON(nil))
		require.NoError(t, err)
		require.Equal(t, string(msg.AppendJSON(nil)), string(again.AppendJSON(nil)))
	})
}
