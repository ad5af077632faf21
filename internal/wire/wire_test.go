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
		{"NegOpenNoSub", `["NEG-OPEN"]`, "NEG-OPEN requires sub_id"},
		{"NegOpenSubEmpty", `["NEG-OPEN","",{},"61"]`, "NEG-OPEN sub_id must not be empty"},
		{"NegOpenShort", `["NEG-OPEN","n",{}]`, "NEG-OPEN takes 4 elements, got 3"},
		{"NegOpenLong", `["NEG-OPEN","n",{},{},"61"]`, "NEG-OPEN takes 4 elements, got 5"},
		{"NegOpenFilterNotObject", `["NEG-OPEN","n",[],"61"]`, "NEG-OPEN requires a filter object"},
		{"NegOpenBadFilter", `["NEG-OPEN","n",{"kinds":["x"]},"61"]`, "invalid filter: "},
		{"NegOpenMessageNotString", `["NEG-OPEN","n",{},61]`, "NEG-OPEN message must be a string"},
		{"NegMsgShort", `["NEG-MSG","n"]`, "NEG-MSG takes 3 elements, got 2"},
		{"NegMsgNotString", `["NEG-MSG","n",null]`, "NEG-MSG message must be a string"},
		{"NegCloseLong", `["NEG-CLOSE","n","x"]`, "NEG-CLOSE takes 2 elements, got 3"},
		{"NegCloseNoSub", `["NEG-CLOSE"]`, "NEG-CLOSE requires sub_id"},
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
	t.Run("Neg", func(t *testing.T) {
		t.Parallel()
		msg, err := wire.ParseClient([]byte(`["NEG-OPEN","n1",{"kinds":[9],"limit":5},"6100"]`))
		require.NoError(t, err)
		require.Equal(t, wire.TypeNegOpen, msg.Type)
		require.Equal(t, "n1", msg.SubID)
		require.Len(t, msg.Filters, 1)
		require.Equal(t, []int{9}, msg.Filters[0].Kinds)
		require.Equal(t, "6100", msg.NegMessage)
		msg, err = wire.ParseClient([]byte(`["NEG-MSG","n1","61"]`))
		require.NoError(t, err)
		require.Equal(t, wire.ClientMessage{Type: wire.TypeNegMsg, SubID: "n1", NegMessage: "61"}, msg)
		msg, err = wire.ParseClient([]byte(`["NEG-CLOSE","n1"]`))
		require.NoError(t, err)
		require.Equal(t, wire.ClientMessage{Type: wire.TypeNegClose, SubID: "n1"}, msg)
		require.Equal(t, `["NEG-MSG","n\"1","61"]`, string(wire.NegMsg(`n"1`, "61")))
		require.Equal(t, `["NEG-ERR","n1","closed: negentropy session idle too long"]`, string(wire.NegErr("n1", wire.MsgNegIdle)))
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
	f.Add([]byte(`["NEG-OPEN","n",{"kinds":[9],"#h":["general"]},"6100000200"]`))
	f.Add([]byte(`["NEG-MSG","n","61"]`))
	f.Add([]byte(`["NEG-CLOSE","n"]`))
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
