package pubsub

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTopic(t *testing.T) {
	t.Parallel()
	const c, ch = "0b7ae0e4-5f6c-4a43-9c1e-2a4b7e0f1d22", "9f1c2d3e-4b5a-4678-9abc-def012345678"

	t.Run("Names", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "buzz:"+c+":channel:"+ch, ChannelTopic(c, ch).String())
		require.Equal(t, "buzz:"+c+":global", GlobalTopic(c).String())
		require.Equal(t, "buzz:control", ControlTopic)
		require.Equal(t, "buzz:barrier:"+ch, BarrierTopic(ch))
		require.Equal(t, "buzz:"+c+":presence:"+strings.Repeat("ab", 32), PresenceKey(c, strings.Repeat("ab", 32)))
	})

	t.Run("ParseRoundTrips", func(t *testing.T) {
		t.Parallel()
		for _, topic := range []Topic{ChannelTopic(c, ch), GlobalTopic(c), WindowTopic(c)} {
			got, err := ParseTopic(topic.String())
			require.NoError(t, err)
			require.Equal(t, topic, got)
			require.True(t, got.Valid())
		}
	})

	t.Run("ParseIsStrict", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{
			"", "buzz:", "buzz:control", "buzz:barrier:" + ch,
			"buzz:not-a-uuid:global",
			"buzz:" + strings.ToUpper(c) + ":global",
			"buzz:" + strings.ReplaceAll(c, "-", "") + ":global",
			"buzz:" + c + ":global:",
			"buzz:" + c + ":globalx",
			"buzz:" + c + ":window:",
			"buzz:" + c + ":window:" + ch,
			"buzz:" + c + ":channel:",
			"buzz:" + c + ":channel:" + strings.ToUpper(ch),
			"buzz:" + c + ":channel:" + ch + "x",
			"buzz:" + c + ":channel:" + ch[:35],
			"buzz:" + c + ":presence:" + ch,
			"BUZZ:" + c + ":global",
			"other:" + c + ":global",
			"buzz:community.example.com:global",
		} {
			_, err := ParseTopic(name)
			require.ErrorIs(t, err, ErrInvalidTopic, name)
		}
	})

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		require.False(t, GlobalTopic("not-a-uuid").Valid())
		require.False(t, ChannelTopic(c, strings.ToUpper(ch)).Valid())
		require.False(t, Topic{}.Valid())
		require.False(t, Topic{Community: c, Channel: ch, Window: true}.Valid(), "a window topic has no channel")
		require.False(t, WindowTopic(c).Global())
	})

	t.Run("ReceiveLabels", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "control", receiveLabel(ControlTopic))
		require.Equal(t, "barrier", receiveLabel(BarrierTopic(ch)))
		require.Equal(t, "global", receiveLabel(GlobalTopic(c).String()))
		require.Equal(t, "channel", receiveLabel(ChannelTopic(c, ch).String()))
	})
}

func FuzzParseTopic(f *testing.F) {
	const c, ch = "0b7ae0e4-5f6c-4a43-9c1e-2a4b7e0f1d22", "9f1c2d3e-4b5a-4678-9abc-def012345678"
	f.Add("buzz:" + c + ":global")
	f.Add("buzz:" + c + ":channel:" + ch)
	f.Add("buzz:not-a-uuid:global")
	f.Add("buzz:control")
	f.Fuzz(func(t *testing.T, name string) {
		topic, err := ParseTopic(name) // must never panic
		if err != nil {
			return
		}
		require.True(t, topic.Valid())
		require.Equal(t, name, topic.String(), "whatever parses round-trips")
	})
}
