package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// A relay started on a database that already holds an event dated a year
// ahead (stored before the importer refused such events, or under a clock
// that has moved back since) still answers it to a plain REQ:
// the app looks for rows above the created-at ceiling at start
// (docs/ARCHITECTURE.md "Created-at ceiling"). The hot window is off, so
// the REQ is PostgreSQL's answer.
func TestStartKeepsFutureRowsReadable(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	require.NoError(t, pg.EnsurePartitions(context.Background(), pool, time.Now(), 3))
	c := fixture.Community(t, pool, "ceiling.test")
	author, reader := eventtest.NewKey(), eventtest.NewKey()
	future := fixture.Event(t, pool, c.ID, author, event.KindNote, eventtest.At(time.Now().AddDate(1, 0, 0).Unix()))
	today := fixture.Event(t, pool, c.ID, author, event.KindNote)

	r := relaytest.Start(t, map[string]string{"DATABASE_URL": url, "BUZZ_HOT_WINDOW_EVENTS": "0"})
	w := r.Dial(t, c.Host)
	w.Auth(reader)
	evs, closed, eose := w.Req("notes", map[string]any{"kinds": []int{event.KindNote}})
	require.True(t, eose, closed)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.ID)
	}
	require.Equal(t, []string{future.ID, today.ID}, got)
}
