package importer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/importer"
	"github.com/buzz-relay/buzz/internal/wire"
)

// An import refuses an event dated more than the drift ahead of the real
// clock, as the live doors do, and imports the rest of the file: no stored
// event lies above the created-at ceiling (docs/ARCHITECTURE.md
// "Created-at ceiling"). At the drift it is imported; one second over, it
// is refused.
func TestImportRefusesEventsFromTheFuture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	c := fixture.Community(t, pool)
	now := time.Now()
	clock := func() time.Time { return now }
	drift := int64(event.MaxClockDrift / time.Second)
	key := eventtest.NewKey()
	evs := []event.Event{
		key.Signed(t, 1, eventtest.Content("past"), eventtest.At(now.Unix()-60)),
		key.Signed(t, 1, eventtest.Content("at the drift"), eventtest.At(now.Unix()+drift)),
		key.Signed(t, 1, eventtest.Content("one second over"), eventtest.At(now.Unix()+drift+1)),
		key.Signed(t, 1, eventtest.Content("next year"), eventtest.At(now.Add(365*24*time.Hour).Unix())),
	}
	data := strings.Join(exportLines(t, evs), "")
	h, tr, err := importer.Verify(strings.NewReader(data))
	require.NoError(t, err)
	s, err := importer.Run(ctx, importer.Params{Pool: pool, CommunityID: c.ID, Host: c.Host, RelayKey: event.GenerateKey(), Now: clock},
		h, tr, strings.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, int64(2), s.Imported)
	require.Equal(t, map[string]int64{"invalid": 2}, s.Refused)
	require.Equal(t, "line 4: "+wire.MsgClockDrift, s.FirstRefused["invalid"])

	var stored []string
	rows, err := pool.Query(ctx, `SELECT content FROM events WHERE community_id = $1 ORDER BY created_at`, c.ID)
	require.NoError(t, err)
	for rows.Next() {
		var content string
		require.NoError(t, rows.Scan(&content))
		stored = append(stored, content)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"past", "at the drift"}, stored)
}
