package event_test

import (
	"encoding/json"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

func TestSignVerify(t *testing.T) {
	t.Parallel()
	k := eventtest.NewKey()
	ev := k.Signed(t, 9, eventtest.Content("line\nbreak \"quoted\" <html> & \x01 tab\t é"), eventtest.Tag("h", "x"))
	_, ok := ev.CheckID()
	require.True(t, ok)
	require.True(t, ev.VerifySignature())

	t.Run("IndependentClientAgrees", func(t *testing.T) {
		t.Parallel()
		var theirs nostr.Event
		require.NoError(t, json.Unmarshal(ev.AppendJSON(nil), &theirs))
		require.Equal(t, ev.ID, theirs.GetID())
		ok, err := theirs.CheckSignature()
		require.NoError(t, err)
		require.True(t, ok)
	})
	t.Run("TamperedContentFails", func(t *testing.T) {
		t.Parallel()
		bad := ev
		bad.Content = "other"
		computed, ok := bad.CheckID()
		require.False(t, ok)
		require.NotEqual(t, ev.ID, computed)
	})
	t.Run("ForeignSignatureFails", func(t *testing.T) {
		t.Parallel()
		other := eventtest.NewKey().Signed(t, 9)
		bad := ev
		bad.Sig = other.Sig
		require.False(t, bad.VerifySignature())
	})
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		again, err := event.Parse(ev.AppendJSON(nil))
		require.NoError(t, err)
		require.Equal(t, ev, again)
	})
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	good := eventtest.NewKey().Signed(t, 1)
	cases := map[string]string{
		"NotObject":   `[1]`,
		"MissingSig":  `{"id":"` + good.ID + `","pubkey":"` + good.PubKey + `","created_at":1,"kind":1,"tags":[],"content":""}`,
		"FloatTime":   `{"id":"` + good.ID + `","pubkey":"` + good.PubKey + `","created_at":1.5,"kind":1,"tags":[],"content":"","sig":"` + good.Sig + `"}`,
		"KindTooBig":  `{"id":"` + good.ID + `","pubkey":"` + good.PubKey + `","created_at":1,"kind":70000,"tags":[],"content":"","sig":"` + good.Sig + `"}`,
		"TagNotStr":   `{"id":"` + good.ID + `","pubkey":"` + good.PubKey + `","created_at":1,"kind":1,"tags":[[1]],"content":"","sig":"` + good.Sig + `"}`,
		"ShortID":     `{"id":"ab","pubkey":"` + good.PubKey + `","created_at":1,"kind":1,"tags":[],"content":"","sig":"` + good.Sig + `"}`,
		"NegTime":     `{"id":"` + good.ID + `","pubkey":"` + good.PubKey + `","created_at":-1,"kind":1,"tags":[],"content":"","sig":"` + good.Sig + `"}`,
		"NullTags":    `{"id":"` + good.ID + `","pubkey":"` + good.PubKey + `","created_at":1,"kind":1,"tags":null,"content":"","sig":"` + good.Sig + `"}`,
		"ContentType": `{"id":"` + good.ID + `","pubkey":"` + good.PubKey + `","created_at":1,"kind":1,"tags":[],"content":5,"sig":"` + good.Sig + `"}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := event.Parse([]byte(in))
			var pe *event.ParseError
			require.ErrorAs(t, err, &pe)
		})
	}
}

func TestFilterMatches(t *testing.T) {
	t.Parallel()
	k := eventtest.NewKey()
	ev := k.Signed(t, 9, eventtest.At(1000), eventtest.Tag("e", "abc"), eventtest.Tag("p", "x", "y"))
	parse := func(s string) *event.Filter {
		f, err := event.ParseFilter([]byte(s))
		require.NoError(t, err)
		return &f
	}
	require.True(t, parse(`{}`).Matches(&ev, ""))
	require.True(t, parse(`{"kinds":[1,9],"since":1000,"until":1000}`).Matches(&ev, ""))
	require.False(t, parse(`{"kinds":[]}`).Matches(&ev, ""))
	require.False(t, parse(`{"since":1001}`).Matches(&ev, ""))
	require.True(t, parse(`{"#e":["abc"]}`).Matches(&ev, ""))
	require.False(t, parse(`{"#e":["y"]}`).Matches(&ev, ""))
	require.True(t, parse(`{"#p":["x"]}`).Matches(&ev, ""), "positional: only the first value counts")
	require.False(t, parse(`{"#p":["y"]}`).Matches(&ev, ""))
	require.True(t, parse(`{"authors":["`+k.PubKey+`"]}`).Matches(&ev, ""))
	require.True(t, parse(`{"#h":["c1"]}`).Matches(&ev, "c1"), "#h falls back to the stored channel")
	require.False(t, parse(`{"#h":["c2"]}`).Matches(&ev, "c1"))
}

func FuzzParseFilter(f *testing.F) {
	f.Add([]byte(`{"kinds":[9],"#h":["general"],"limit":50}`))
	f.Add([]byte(`{"ids":["` + "ab" + `"],"since":1}`))
	f.Add([]byte(`{"search":"deploy","before_id":"zz","until":5}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		flt, err := event.ParseFilter(b)
		if err != nil {
			return
		}
		again, err := event.ParseFilter(flt.AppendJSON(nil))
		require.NoError(t, err)
		require.Equal(t, string(flt.AppendJSON(nil)), string(again.AppendJSON(nil)))
	})
}

func FuzzParseEvent(f *testing.F) {
	k := eventtest.NewKey()
	ev := event.Event{Kind: 1, CreatedAt: 5, Content: "x", Tags: event.Tags{{"p", "a"}}}
	_ = ev.Sign(k.SK)
	f.Add(ev.AppendJSON(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := event.Parse(b)
		if err != nil {
			return
		}
		again, err := event.Parse(e.AppendJSON(nil))
		require.NoError(t, err)
		require.Equal(t, e.ComputeID(), again.ComputeID())
	})
}
