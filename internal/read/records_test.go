package read_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// records runs a NEG read and returns created_at by id.
func (w *world) records(t *testing.T, maximum int, filters ...string) (map[string]int64, error) {
	t.Helper()
	rd, err := w.open2(t, read.SurfaceNEG, filters...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	got := map[string]int64{}
	err = rd.Records(context.Background(), maximum, func(ts int64, id [32]byte) {
		k := hex.EncodeToString(id[:])
		_, dup := got[k]
		require.False(t, dup, "an id is handed over once")
		got[k] = ts
	})
	return got, err
}

func recordsOf(evs ...event.Event) map[string]int64 {
	out := map[string]int64{}
	for _, ev := range evs {
		out[ev.ID] = ev.CreatedAt
	}
	return out
}

// TestRecords: a NEG read's set is what a REQ with the same filter could
// return, without its limit: the reader's community, open channels and
// global events, never a private channel it is not in; over the maximum
// it is refused.
func TestRecords(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	w := newWorld(t, pool)
	tagged := fixture.Event(t, pool, w.cid, w.other, 1, eventtest.Tag("t", "sync"))

	t.Run("Scope", func(t *testing.T) {
		got, err := w.records(t, 100, `{"kinds":[1,9],"limit":1}`)
		require.NoError(t, err)
		require.Equal(t, recordsOf(w.inOpen, w.global, tagged), got, "no limit cut, no private channel, no other community")
		req := w.rows(t, read.SurfaceREQ, `{"kinds":[1,9]}`)
		require.Len(t, req, len(got), "what a REQ returns")
		for _, id := range req {
			require.Contains(t, got, id)
		}
	})
	t.Run("PostFilter", func(t *testing.T) {
		got, err := w.records(t, 100, `{"kinds":[1,9],"#t":["sync"]}`)
		require.NoError(t, err)
		require.Equal(t, recordsOf(tagged), got)
		got, err = w.records(t, 100, `{"#h":["`+w.open+`"]}`)
		require.NoError(t, err)
		require.Equal(t, recordsOf(w.inOpen), got)
		// "#h" matches the stored tag exactly (NIP-01): the SQL scope finds
		// the channel's events, the post-filter drops them.
		got, err = w.records(t, 100, `{"kinds":[9],"#h":["`+strings.ToUpper(w.open)+`"]}`)
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("NamedPrivateChannelIsRefused", func(t *testing.T) {
		_, err := w.records(t, 100, `{"kinds":[9],"#h":["`+w.private+`"]}`)
		var ref *read.Refusal
		require.ErrorAs(t, err, &ref)
		require.Equal(t, wire.MsgNotChannelMember, ref.Reason)
	})
	t.Run("MaximumIsInclusive", func(t *testing.T) {
		got, err := w.records(t, 3, `{"kinds":[1,9]}`)
		require.NoError(t, err)
		require.Len(t, got, 3, "three records at a maximum of three")
		_, err = w.records(t, 2, `{"kinds":[1,9]}`)
		var ref *read.Refusal
		require.ErrorAs(t, err, &ref)
		require.Equal(t, read.Refusal{Code: read.CodeNegTooManyRecords, Reason: wire.NegTooManyRecords(2)}, *ref)
		got, err = w.records(t, 1, `{"kinds":[1,9],"#t":["sync"]}`)
		require.NoError(t, err, "the post-filtered path at its maximum")
		require.Len(t, got, 1)
	})
	// A set the LIMIT cut is never served as complete: more candidate rows
	// than the maximum refuse the read even when the post-filter would
	// have kept fewer.
	t.Run("CandidatesOverMaximum", func(t *testing.T) {
		pool, _ := dbtest.NewDB(t)
		w := newWorld(t, pool)
		fixture.Event(t, pool, w.cid, w.other, 9, eventtest.Channel(w.open))
		_, err := w.records(t, 1, `{"kinds":[9],"#h":["`+strings.ToUpper(w.open)+`"]}`)
		var ref *read.Refusal
		require.ErrorAs(t, err, &ref)
		require.Equal(t, read.CodeNegTooManyRecords, ref.Code)
		got, err := w.records(t, 2, `{"kinds":[9],"#h":["`+strings.ToUpper(w.open)+`"]}`)
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("Member", func(t *testing.T) {
		pool, _ := dbtest.NewDB(t)
		w := newWorld(t, pool)
		fixture.ChannelMember(t, pool, w.cid, w.private, w.reader, "member")
		got, err := w.records(t, 100, `{"kinds":[1,9]}`)
		require.NoError(t, err)
		require.Equal(t, recordsOf(w.inOpen, w.inPriv, w.global), got)
	})
	t.Run("Deduplicated", func(t *testing.T) {
		got, err := w.records(t, 100, `{"kinds":[9]}`, `{"ids":["`+w.inOpen.ID+`","`+w.global.ID+`"]}`)
		require.NoError(t, err)
		require.Equal(t, recordsOf(w.inOpen, w.global), got)
		_, err = w.records(t, 2, `{"kinds":[9]}`, `{"kinds":[1]}`)
		var ref *read.Refusal
		require.ErrorAs(t, err, &ref, "the maximum holds across filters")
		require.Equal(t, read.CodeNegTooManyRecords, ref.Code)
	})
}
