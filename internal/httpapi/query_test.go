package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/httpapi"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/read"
)

// ids returns the event ids of a /query answer, in order.
func ids(t *testing.T, body string) []string {
	t.Helper()
	var evs []event.Event
	require.NoError(t, json.Unmarshal([]byte(body), &evs), body)
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

// publish stores events through POST /events, signed by b.key.
func (b *testBundle) publish(t *testing.T, evs ...event.Event) {
	t.Helper()
	for _, ev := range evs {
		res := b.signedPost(t, b.key, "/events", ev.AppendJSON(nil))
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Contains(t, res.body, `"accepted":true,"message":""`)
	}
}

func TestQuery(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	t.Run("BadFilters", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		eleven := "[" + strings.Repeat(`{"kinds":[9]},`, 10) + `{"kinds":[9]}]`
		cases := []struct {
			name, body, msg string
		}{
			{"Object", `{}`, "invalid filters: body must be a JSON array of filters"},
			{"Empty", `[]`, "invalid filters: at least one filter is required"},
			{"WrongType", `[{"kinds":"9"}]`, "invalid filters: kinds must be an array of integers between 0 and 65535"},
			{"Eleven", eleven, "invalid filters: at most 10 filters per request"},
			{"BeforeIDWithoutUntil", `[{"kinds":[9],"before_id":"` + strings.Repeat("a", 64) + `"}]`, "before_id requires until to be set"},
			{"BeforeIDMalformed", `[{"kinds":[9],"until":5,"before_id":"zz"}]`, "before_id must be a 64-char hex event id"},
			{"TooManyChannels", `[{"kinds":[9],"#h":[` + channels(129) + `]}]`, "too many explicit channels"},
			{"MixedSearch", `[{"kinds":[9],"search":"x"},{"kinds":[9]}]`, "mixed search and non-search filters not supported"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				res := b.signedPost(t, b.key, "/query", []byte(tc.body))
				require.Equal(t, http.StatusBadRequest, res.status)
				require.Equal(t, errorJSON(tc.msg), res.body)
			})
		}
	})

	t.Run("PGate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.signedPost(t, b.key, "/query", []byte(`[{"kinds":[1059]}]`))
		require.Equal(t, http.StatusForbidden, res.status)
		require.Equal(t, `{"error":"restricted: p-gated kinds require #p tag matching your pubkey"}`, res.body)
		res = b.signedPost(t, b.key, "/query", []byte(`[{"kinds":[1059],"#p":["`+b.key.PubKey+`"]}]`))
		require.Equal(t, http.StatusOK, res.status)
	})

	t.Run("DedupeAcrossFilters", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		now := time.Now().Unix()
		x := b.key.Signed(t, 9, eventtest.Channel(b.general), eventtest.At(now-10), eventtest.Content("x"))
		y := b.key.Signed(t, 9, eventtest.Channel(b.general), eventtest.At(now-5), eventtest.Content("y"))
		b.publish(t, x, y)
		body := fmt.Sprintf(`[{"ids":[%q]},{"kinds":[9],"#h":[%q]}]`, x.ID, b.general)
		res := b.signedPost(t, b.key, "/query", []byte(body))
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, []string{x.ID, y.ID}, ids(t, res.body))
	})

	t.Run("InaccessibleChannelYieldsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		secret, owner, msg := b.privateChannel(t)
		res := b.signedPost(t, b.key, "/query", []byte(`[{"kinds":[9],"#h":["`+secret+`"]}]`))
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, `[]`, res.body)
		require.Zero(t, b.reads.calls.Load(), "a filter on inaccessible channels issues no read")

		// The channel's member reads the same filter.
		res = b.signedPost(t, owner, "/query", []byte(`[{"kinds":[9],"#h":["`+secret+`"]}]`))
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, []string{msg.ID}, ids(t, res.body))
	})

	t.Run("BeforeIDPassedToReader", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		at := time.Now().Unix()
		var evs []event.Event
		for i := range 3 {
			evs = append(evs, b.key.Signed(t, 9, eventtest.Channel(b.general), eventtest.At(at), eventtest.Content(fmt.Sprint(i))))
		}
		older := b.key.Signed(t, 9, eventtest.Channel(b.general), eventtest.At(at-1), eventtest.Content("older"))
		b.publish(t, append(evs, older)...)
		// Newest first, ties by ascending id.
		tied := []string{evs[0].ID, evs[1].ID, evs[2].ID}
		slices.Sort(tied)
		first := b.signedPost(t, b.key, "/query", []byte(`[{"kinds":[9],"limit":2}]`))
		page := ids(t, first.body)
		require.Equal(t, tied[:2], page)
		upper := strings.ToUpper(page[1])
		res := b.signedPost(t, b.key, "/query", []byte(fmt.Sprintf(`[{"kinds":[9],"until":%d,"before_id":%q}]`, at, upper)))
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, []string{tied[2], older.ID}, ids(t, res.body), "the keyset page after (until, before_id)")
	})

	t.Run("EmptyKindsAndEmptySearch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		b.publish(t, b.key.Signed(t, 9, eventtest.Channel(b.general), eventtest.Content("anything")))
		res := b.signedPost(t, b.key, "/query", []byte(`[{"kinds":[]},{"kinds":[9],"limit":0}]`))
		require.Equal(t, `[]`, res.body)
		res = b.signedPost(t, b.key, "/query", []byte(`[{"search":"  "}]`))
		require.Equal(t, `[]`, res.body)
		require.Zero(t, b.reads.calls.Load())
	})

	t.Run("InternalFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		b.reads.fail.Store(true)
		res := b.signedPost(t, b.key, "/query", []byte(`[{"kinds":[9]}]`))
		require.Equal(t, http.StatusInternalServerError, res.status)
		require.Equal(t, `{"error":"internal server error"}`, res.body)
		require.NotZero(t, b.reads.calls.Load())
	})
}

func TestCount(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	t.Run("Sums", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		secret, _, _ := b.privateChannel(t)
		b.publish(t,
			b.key.Signed(t, 9, eventtest.Channel(b.general), eventtest.Content("a")),
			b.key.Signed(t, 9, eventtest.Channel(b.general), eventtest.Content("b")))
		body := fmt.Sprintf(`[{"kinds":[9],"#h":[%q]},{"kinds":[9],"#h":[%q]},{"kinds":[9],"limit":1}]`, b.general, secret)
		res := b.signedPost(t, b.key, "/count", []byte(body))
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, `{"count":4}`, res.body)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.signedPost(t, b.key, "/count", []byte(`[{"kinds":[9],"search":"x"}]`))
		require.Equal(t, http.StatusBadRequest, res.status)
		require.Equal(t, errorJSON("search is not supported in COUNT"), res.body)
		res = b.signedPost(t, b.key, "/count", []byte(`[{"kinds":[9]}]`))
		require.Equal(t, http.StatusOK, res.status)
		res = b.signedPost(t, b.key, "/count", []byte(`[{"kinds":[1059]}]`))
		require.Equal(t, http.StatusForbidden, res.status)
		require.Equal(t, errorJSON("restricted: p-gated kinds require #p tag matching your pubkey"), res.body)

		// A filter COUNT(*) cannot answer exactly, over more candidates
		// than the fallback may fetch.
		tooBroad := []byte(`[{"kinds":[9],"#t":["bulk"]}]`)
		require.Equal(t, `{"count":0}`, b.signedPost(t, b.key, "/count", tooBroad).body)
		// Rows written straight through the store: each has its own id, and
		// all share one signature (signing thousands of events would take
		// minutes under the race detector; no read path checks it).
		signed := b.key.Signed(t, 9, eventtest.Channel(b.general), eventtest.Tag("t", "bulk"))
		bulk := make([]event.Event, read.CountFallbackMaximum+1)
		for i := range bulk {
			bulk[i] = signed
			bulk[i].Tags = slices.Clone(signed.Tags)
			bulk[i].Content = fmt.Sprint("bulk ", i)
			bulk[i].ID = bulk[i].ComputeID()
		}
		require.NoError(t, pg.InTx(context.Background(), d.pool, func(tx pgx.Tx) error {
			fixture.Store(t, tx, b.ta.CommunityID, b.general, bulk...)
			return nil
		}))
		b = b.serve(t) // a door whose clock is not older than NIP-98's window after the bulk write
		res = b.signedPost(t, b.key, "/count", tooBroad)
		require.Equal(t, http.StatusBadRequest, res.status)
		require.Equal(t, errorJSON("restricted: count filter requires narrower constraints"), res.body)
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.CountFallbackRejections))

		down := b.serve(t, func(c *httpapi.Config) { c.Reader = read.New(read.Config{Pool: d.downPool(t)}) })
		res = down.signedPost(t, b.key, "/count", []byte(`[{"kinds":[9]}]`))
		require.Equal(t, http.StatusInternalServerError, res.status)
		require.Equal(t, `{"error":"internal server error"}`, res.body)
	})
}

func channels(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%q", fmt.Sprintf("c%d", i))
	}
	return strings.Join(out, ",")
}
