package window_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/window"
)

// TestAuxByteCut covers the aux closure's byte budget (MaxBytes,
// BUZZ_READ_MAX_BYTES): aux that fits is kept whole, the aux event that
// would go over the budget cuts the closure like its page limit (counted,
// logged), and the page itself is still served with its bounds.
func TestAuxByteCut(t *testing.T) {
	t.Parallel()
	w := newChannelWorld(t)
	root := w.at(t, unixNow()-600)
	const reactions = 5
	for i := range reactions {
		fixture.Event(t, w.pool, w.cid, w.author, event.KindReaction, eventtest.Channel(w.ch),
			eventtest.Tag("e", root.ID), eventtest.At(unixNow()-500+int64(i)), eventtest.Content("+"))
	}
	whole, err := w.engine.Channel(context.Background(), w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 5, Kinds: []int{9}, IncludeAux: true})
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
			e := window.New(window.Config{Pool: w.pool, Key: event.GenerateKey(), Metrics: m,
				Logger: slog.New(slog.NewJSONHandler(log, nil)), MaxBytes: tc.maxBytes})
			items, err := e.Channel(context.Background(), w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 5, Kinds: []int{9}, IncludeAux: true})
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

// TestWindowByteBudget covers the page's byte budget (MaxBytes): rows
// totalling exactly the budget are one page, one byte less ends the page
// before the last row with has_more and the exact next_cursor of the last
// row retained, and paging on from it loses and repeats nothing.
func TestWindowByteBudget(t *testing.T) {
	t.Parallel()
	w := newChannelWorld(t)
	const rows = 5
	var posted []event.Event // newest first
	ts := unixNow() - 100    // read once: two rows of one second would be one event
	for i := range rows {
		posted = append(posted, w.at(t, ts-int64(i), eventtest.Content("same size")))
	}
	size := posted[0].JSONSize()
	type boundsContent struct {
		HasMore    bool `json:"has_more"`
		NextCursor *struct {
			CreatedAt int64  `json:"created_at"`
			ID        string `json:"id"`
		} `json:"next_cursor"`
	}
	serve := func(t *testing.T, maxBytes int, cursor *window.Cursor) ([]string, boundsContent) {
		t.Helper()
		e := window.New(window.Config{Pool: w.pool, Key: event.GenerateKey(),
			Metrics: metrics.New(prometheus.NewRegistry()), MaxBytes: maxBytes})
		items, err := e.Channel(context.Background(), w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 10, Kinds: []int{9}, Cursor: cursor})
		require.NoError(t, err)
		evs := make([]event.Event, len(items))
		for i := range items {
			evs[i] = items[i].Event
		}
		got, content := split(t, evs)
		var b boundsContent
		require.NoError(t, json.Unmarshal([]byte(content), &b))
		return evIDs(got), b
	}

	t.Run("AtBudget", func(t *testing.T) {
		t.Parallel()
		got, b := serve(t, rows*size, nil)
		require.Equal(t, evIDs(posted), got)
		require.False(t, b.HasMore)
		require.Nil(t, b.NextCursor)
	})

	t.Run("OneByteShortPagesOnExactly", func(t *testing.T) {
		t.Parallel()
		got, b := serve(t, rows*size-1, nil)
		require.Equal(t, evIDs(posted[:rows-1]), got)
		require.True(t, b.HasMore)
		require.NotNil(t, b.NextCursor)
		require.Equal(t, posted[rows-2].ID, b.NextCursor.ID)
		require.Equal(t, posted[rows-2].CreatedAt, b.NextCursor.CreatedAt)
		rest, b := serve(t, rows*size-1, &window.Cursor{CreatedAt: b.NextCursor.CreatedAt, ID: b.NextCursor.ID})
		require.Equal(t, evIDs(posted[rows-1:]), rest)
		require.False(t, b.HasMore)
	})

	t.Run("SmallerThanOneRow", func(t *testing.T) {
		t.Parallel()
		got, b := serve(t, 1, nil)
		require.Equal(t, evIDs(posted[:1]), got, "the first row is always retained")
		require.True(t, b.HasMore)
	})
}
