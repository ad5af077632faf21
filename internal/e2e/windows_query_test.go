package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// TestWindowsKeepTheirEvents is docs/NIP-CW.md §1 step 7: the removal of
// repeated ids across a /query request never touches a window's own
// events. Two overlapping channel windows each come back complete with
// their bounds, and plain filters are still de-duplicated among
// themselves.
func TestWindowsKeepTheirEvents(t *testing.T) {
	t.Parallel()
	r, alice, w, ch := windowRelay(t, "overlap")
	base := time.Now().Unix() - 60
	var msgs []event.Event
	for i := range 3 {
		ev := alice.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base+int64(i)))
		w.MustPublish(ev)
		msgs = append(msgs, ev)
	}
	window := `{"top_level":true,"#h":["` + ch + `"],"kinds":[9],"limit":2}`
	plain := `{"#h":["` + ch + `"],"kinds":[9],"limit":2}`
	body := `[` + window + `,` + window + `,` + plain + `,` + plain + `]`
	var got []string
	for _, ev := range queryEvents(t, r, alice, body) {
		if ev.Kind == 39006 {
			got = append(got, "bounds")
			continue
		}
		got = append(got, ev.ID)
	}
	newest, next := msgs[2].ID, msgs[1].ID
	require.Equal(t, []string{
		newest, next, "bounds", // the first window
		newest, next, "bounds", // the second, complete although it repeats the first
		newest, next, // the first plain filter: not de-duplicated against the windows
		// the second plain filter repeats the first: removed
	}, got)
}
