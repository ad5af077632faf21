package channelwindow_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/channelwindow"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestAuxByteCut covers the aux closure's byte budget (AuxMaxBytes,
// BUZZ_READ_MAX_BYTES): aux that fits is kept whole, the aux event that
// would go over the budget cuts the closure like its page limit (counted,
// logged), and the page itself is still served with its bounds.
func TestAuxByteCut(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	root := w.at(t, now()-600)
	const reactions = 5
	for i := range reactions {
		fixture.Event(t, w.pool, w.cid, w.author, event.KindReaction, eventtest.Channel(w.ch),
			eventtest.Tag("e", root.ID), eventtest.At(now()-500+int64(i)), eventtest.Content("+"))
	}
	whole, err := w.engine.Window(context.Background(), w.scope(), channelwindow.Request{Channel: w.ch, Limit: 5, Kinds: []int{9}, IncludeAux: true})
	require.NoError(t, err)
	require.Len(t, whole, 1+reactions+1)
	size := len(whole[1].JSON)
	for i := 1; i <= reactions; i++ {
		require.Len(t, whole[i].JSON, size, "every reaction has the same size")
	}

	for _, tc := range []struct {
		name     string
		maxBytes int
		kept     int
	}{
		{"AtBudget", reactions * size, reactions},
		{"OneByteShort", reactions*size - 1, reactions - 1},
		{"ThreeFit", 3*size + size/2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := metrics.New(prometheus.NewRegistry())
			log := &logtest.Buffer{}
			e := channelwindow.New(channelwindow.Config{Store: store.New(w.pool), Key: event.GenerateKey(), Metrics: m,
				Logger: slog.New(slog.NewJSONHandler(log, nil)), AuxMaxBytes: tc.maxBytes})
			items, err := e.Window(context.Background(), w.scope(), channelwindow.Request{Channel: w.ch, Limit: 5, Kinds: []int{9}, IncludeAux: true})
			require.NoError(t, err)
			require.Len(t, items, 1+tc.kept+1)
			require.Equal(t, root.ID, items[0].Event.ID)
			for i := 1; i <= tc.kept; i++ {
				require.Equal(t, whole[i].Event.ID, items[i].Event.ID, "aux in discovery order, cut at the end")
			}
			require.Equal(t, 39006, items[len(items)-1].Event.Kind)
			cut := 0.0
			if tc.kept < reactions {
				cut = 1
				require.Contains(t, log.String(), `"msg":"channel window aux closure cut at its page or byte limit"`)
			}
			require.Equal(t, cut, testutil.ToFloat64(m.Window.AuxTruncated))
		})
	}
}
