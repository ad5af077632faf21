package event_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

const slot = "read-state:0123456789abcdef0123456789abcdef"

// docs/PROTOCOL.md §14.1: the conforming layout and each nonconforming example.
func TestIsReadState(t *testing.T) {
	t.Parallel()
	k := eventtest.NewKey()
	d := eventtest.Tag("d", slot)
	tt := eventtest.Tag("t", event.ReadStateTag)

	for _, tc := range []struct {
		name string
		kind int
		opts []eventtest.Option
		want bool
	}{
		{"Conforming", event.KindAppData, []eventtest.Option{d, tt}, true},
		{"ConformingReversed", event.KindAppData, []eventtest.Option{tt, d}, true},
		{"ConformingWithOtherTags", event.KindAppData,
			[]eventtest.Option{eventtest.Tag("p", k.PubKey), d, eventtest.Tag("t", "other"), tt, eventtest.Tag("h", "ignored")}, true},
		{"ConformingWithLongTNextToExactT", event.KindAppData, []eventtest.Option{d, eventtest.Tag("t", "read-state", "x"), tt}, true},
		{"ConformingDWithThirdElement", event.KindAppData, []eventtest.Option{eventtest.Tag("d", slot, "x"), tt}, true},

		{"OtherKind", 30023, []eventtest.Option{d, tt}, false},
		{"UppercasePrefix", event.KindAppData, []eventtest.Option{eventtest.Tag("d", strings.ToUpper(slot[:11])+slot[11:]), tt}, false},
		{"UppercaseHex", event.KindAppData, []eventtest.Option{eventtest.Tag("d", "read-state:0123456789ABCDEF0123456789ABCDEF"), tt}, false},
		{"Slot31", event.KindAppData, []eventtest.Option{eventtest.Tag("d", slot[:len(slot)-1]), tt}, false},
		{"Slot33", event.KindAppData, []eventtest.Option{eventtest.Tag("d", slot+"0"), tt}, false},
		{"NotPrefixed", event.KindAppData, []eventtest.Option{eventtest.Tag("d", "0123456789abcdef0123456789abcdef"), tt}, false},
		{"AppData", event.KindAppData, []eventtest.Option{eventtest.Tag("d", "com.example.settings"), tt}, false},
		{"NoDTag", event.KindAppData, []eventtest.Option{tt}, false},
		{"TwoIdenticalDTags", event.KindAppData, []eventtest.Option{d, d, tt}, false},
		{"TwoDifferentDTags", event.KindAppData,
			[]eventtest.Option{d, eventtest.Tag("d", "read-state:ffffffffffffffffffffffffffffffff"), tt}, false},
		{"OneElementDNextToValid", event.KindAppData, []eventtest.Option{d, eventtest.Tag("d"), tt}, false},
		{"OneElementDBeforeValid", event.KindAppData, []eventtest.Option{eventtest.Tag("d"), d, tt}, false},
		{"NoTTag", event.KindAppData, []eventtest.Option{d}, false},
		{"TwoExactTTags", event.KindAppData, []eventtest.Option{d, tt, tt}, false},
		{"LongTTagOnly", event.KindAppData, []eventtest.Option{d, eventtest.Tag("t", "read-state", "x")}, false},
		{"ShortTTag", event.KindAppData, []eventtest.Option{d, eventtest.Tag("t")}, false},
		{"OtherTValue", event.KindAppData, []eventtest.Option{d, eventtest.Tag("t", "Read-State")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := k.Signed(t, tc.kind, tc.opts...)
			require.Equal(t, tc.want, event.IsReadState(&ev))

			// The stored-row classifier agrees, with d_tag the first d
			// tag's value as the store records it.
			tags, err := json.Marshal(ev.Tags)
			require.NoError(t, err)
			require.Equal(t, tc.want, event.ReadStateRow(ev.Kind, ev.Tags.First("d").Value(), tags))
		})
	}
}

func TestIsReadStateD(t *testing.T) {
	t.Parallel()
	require.True(t, event.IsReadStateD(slot))
	for _, d := range []string{"", "read-state:", slot + "\n", " " + slot, slot[:len(slot)-1], slot + "a",
		"READ-STATE:0123456789abcdef0123456789abcdef", "read-state:0123456789abcdef0123456789abcdeG"} {
		require.False(t, event.IsReadStateD(d), "%q", d)
	}
}
