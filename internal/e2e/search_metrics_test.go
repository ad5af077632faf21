package e2e

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// histogramCount returns the sample count of a histogram series labelled
// transport=value in the relay's registry.
func histogramCount(t *testing.T, r *relaytest.Relay, name, transport string) uint64 {
	t.Helper()
	families, err := r.App.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "transport" && l.GetValue() == transport {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatalf("no %s{transport=%q}", name, transport)
	return 0
}

// TestSearchMetrics checks the NIP-50 metrics of docs/PROTOCOL.md §12.9: requests by
// transport and outcome, statement durations, and what became of each
// candidate (a private channel's hit counts as "channel" for an outsider).
func TestSearchMetrics(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	m := r.App.Metrics().Search
	alice, bob := eventtest.NewKey(), eventtest.NewKey()
	wa := r.Dial(t, "")
	wa.Auth(alice)
	open, private := uuid.NewString(), uuid.NewString()
	wa.MustPublish(alice.Signed(t, event.KindCreateGroup, eventtest.Tag("h", open), eventtest.Tag("name", "open")))
	wa.MustPublish(alice.Signed(t, event.KindCreateGroup, eventtest.Tag("h", private), eventtest.Tag("name", "p"), eventtest.Tag("visibility", "private")))
	wa.MustPublish(alice.Signed(t, 9, eventtest.Channel(open), eventtest.Content("metrics zebra open")))
	wa.MustPublish(alice.Signed(t, 9, eventtest.Channel(private), eventtest.Content("metrics zebra private")))

	wb := r.Dial(t, "")
	wb.Auth(bob)
	evs, closed, eose := wb.Req("s", map[string]any{"search": "zebra", "kinds": []int{9}})
	require.True(t, eose, closed)
	require.Len(t, evs, 1, "the private message is not the outsider's")
	require.Equal(t, 1.0, testutil.ToFloat64(m.Requests.WithLabelValues("ws", "ok")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Hits.WithLabelValues("ws", "sent")))
	require.Equal(t, uint64(1), histogramCount(t, r, "buzz_search_query_seconds", "ws"), "one FTS statement timed")
	status, body := r.HTTP(t, "", http.MethodPost, "/query", &alice, []byte(`[{"search":"zebra","kinds":[9]}]`))
	require.Equal(t, http.StatusOK, status, string(body))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Requests.WithLabelValues("http", "ok")))
	require.Equal(t, 2.0, testutil.ToFloat64(m.Hits.WithLabelValues("http", "sent")))
}
