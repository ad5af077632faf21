package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// TestWindowFieldsOverWebSocket is docs/NIP-CW.md §1: the WebSocket has no
// window modes. A REQ carrying the NIP-CW fields is served as the plain
// filter that remains: its stored rows, never an overlay.
func TestWindowFieldsOverWebSocket(t *testing.T) {
	t.Parallel()
	_, alice, w, ch := windowRelay(t, "ws")
	base := time.Now().Unix() - 60
	root := alice.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base))
	w.MustPublish(root)
	reply := alice.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base+1),
		eventtest.Tag("e", root.ID, "", "root"), eventtest.Tag("e", root.ID, "", "reply"))
	w.MustPublish(reply)

	filters := map[string]string{
		// Thread mode: plain reading of #e, #h and kinds matches the reply.
		"Thread": `{"thread_window":true,"#h":["` + ch + `"],"#e":["` + root.ID + `"],"kinds":[9],"limit":50}`,
		// Channel mode: plain reading matches both, limit 1 keeps the newest.
		"Channel": `{"top_level":true,"#h":["` + ch + `"],"kinds":[9],"limit":1,"include_summaries":true}`,
	}
	want := map[string][]string{"Thread": {reply.ID}, "Channel": {reply.ID}}
	for name, f := range filters {
		t.Run(name, func(t *testing.T) {
			var filter map[string]any
			require.NoError(t, json.Unmarshal([]byte(f), &filter))
			evs, closed, eose := w.Req("sub-"+name, filter)
			require.True(t, eose, closed)
			var got []string
			for _, ev := range evs {
				require.NotContains(t, []int{39005, 39006, 39007}, ev.Kind, "no overlay over REQ")
				got = append(got, ev.ID)
			}
			require.Equal(t, want[name], got)
			w.Send("CLOSE", "sub-"+name)
		})
	}
}
