package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

// The database rules of migration 0006 (docs/PROTOCOL.md §14.3), exercised the way
// any writer meets them: raw SQL on a fully migrated database.

func TestReadStateWatermarkTrigger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AcceptedRowsAdvanceTheWatermark", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		c := newCoord(community)
		_, _, ok := c.watermark(t, pool)
		require.False(t, ok)

		first := c.row(baseTime, idFrom(0x80)).mustInsert(t, pool)
		c.requireWatermark(t, pool, first)
		newer := c.row(baseTime.Add(time.Second), idFrom(0x80)).mustInsert(t, pool)
		c.requireWatermark(t, pool, newer)
		// Same second, lower id: it outranks.
		lower := c.row(newer.CreatedAt, idFrom(0x10)).mustInsert(t, pool)
		c.requireWatermark(t, pool, lower)
		require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM parameterized_event_watermarks WHERE community_id = $1", community))
	})

	// A stale conforming insert is refused (docs/PROTOCOL.md §14.3).
	t.Run("StaleTupleRejected", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		c := newCoord(community)
		head := c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)

		for name, stale := range map[string]rsRow{
			"Older":              c.row(baseTime.Add(-time.Second), idFrom(0x00)),
			"SameSecondHigherID": c.row(baseTime, idFrom(0xf0)),
		} {
			_, err := stale.insert(ctx, pool)
			requirePgError(t, err, "23514", staleText)
			require.True(t, pg.IsStaleWatermark(err), name)
			require.False(t, pg.IsHardDeleteFence(err), name)
			require.Equal(t, "gone", rowState(t, pool, stale), name)
		}
		require.Equal(t, 1, c.rows(t, pool))
		c.requireWatermark(t, pool, head)

		// The rejection aborts the writer's transaction: its other work is gone too.
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		other := newCoord(community)
		other.row(baseTime, idFrom(0x40)).mustInsert(t, tx)
		_, err = c.row(baseTime.Add(-time.Hour), idFrom(0x40)).insert(ctx, tx)
		require.True(t, pg.IsStaleWatermark(err), "%v", err)
		require.Error(t, tx.Commit(ctx))
		require.Zero(t, other.rows(t, pool))
		_, _, ok := other.watermark(t, pool)
		require.False(t, ok)
	})

	// An insert equal to the watermark stores nothing (docs/PROTOCOL.md §14.3).
	t.Run("ExactWatermarkTupleInsertsNothing", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		c := newCoord(community)
		head := c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)

		tag, err := head.insert(ctx, pool)
		require.NoError(t, err, "live payload")
		require.Zero(t, tag.RowsAffected())
		require.Equal(t, "INSERT 0 0", tag.String())
		require.Equal(t, "live", rowState(t, pool, head))

		// NIP-09 / soft delete: the purge trigger removes the payload, the
		// watermark stays.
		_, err = pool.Exec(ctx, "UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2", community, head.ID)
		require.NoError(t, err)
		require.Equal(t, "gone", rowState(t, pool, head))
		c.requireWatermark(t, pool, head)

		tag, err = head.insert(ctx, pool)
		require.NoError(t, err, "deleted payload")
		require.Equal(t, "INSERT 0 0", tag.String())
		require.Equal(t, "gone", rowState(t, pool, head))
		require.Zero(t, c.rows(t, pool))

		// Any older tuple stays refused.
		_, err = c.row(baseTime.Add(-time.Second), idFrom(0x00)).insert(ctx, pool)
		require.True(t, pg.IsStaleWatermark(err), "%v", err)
	})

	// Tag elements may be any JSON value: a conforming row whose tags also
	// hold a string, a number, an object and null is classified, not an error.
	t.Run("NonArrayTagElements", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		c := newCoord(community)
		head := c.row(baseTime, idFrom(0x40))
		head.Tags = `["d", 7, {"0":"d"}, null, ["d","` + c.D + `"], ["t","read-state"]]`
		head.mustInsert(t, pool)
		c.requireWatermark(t, pool, head)
		_, err := c.row(baseTime.Add(-time.Second), idFrom(0x40)).insert(ctx, pool)
		require.True(t, pg.IsStaleWatermark(err), "%v", err)
	})

	// Two writers on one coordinate: the second waits on the watermark row
	// and decides against what the first committed.
	t.Run("ConcurrentWritersSerialize", func(t *testing.T) {
		t.Parallel()
		for _, firstCommits := range []bool{true, false} {
			pool, community := readStatePool(t)
			c := newCoord(community)
			c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)

			first, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer first.Rollback(ctx) //nolint:errcheck // a no-op once committed or rolled back
			newer := c.row(baseTime.Add(2*time.Second), idFrom(0x40)).mustInsert(t, first)

			older := c.row(baseTime.Add(time.Second), idFrom(0x40))
			done := make(chan error, 1)
			go func() {
				_, err := older.insert(ctx, pool)
				done <- err
			}()
			require.Eventually(t, func() bool {
				var waiting int
				err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
				return err == nil && waiting == 1
			}, 10*time.Second, 10*time.Millisecond, "the second writer waits")

			if firstCommits {
				require.NoError(t, first.Commit(ctx))
				require.True(t, pg.IsStaleWatermark(<-done), "older than what committed")
				c.requireWatermark(t, pool, newer)
				require.Equal(t, "gone", rowState(t, pool, older))
			} else {
				require.NoError(t, first.Rollback(ctx))
				require.NoError(t, <-done, "the first writer's tuple never counted")
				c.requireWatermark(t, pool, older)
				require.Equal(t, "gone", rowState(t, pool, newer))
			}
		}
	})

	t.Run("NonconformingRowsPassWithoutWatermark", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		c := newCoord(community)
		for name, r := range map[string]rsRow{
			"TwoTTags":     {D: c.D, Tags: `[["d","` + c.D + `"],["t","read-state"],["t","read-state"]]`},
			"LongTTag":     {D: c.D, Tags: `[["d","` + c.D + `"],["t","read-state","x"]]`},
			"AppData":      {D: "com.example.settings", Tags: `[["d","com.example.settings"]]`},
			"Uppercase":    {D: "read-state:0123456789ABCDEF0123456789ABCDEF", Tags: rsTags("read-state:0123456789ABCDEF0123456789ABCDEF")},
			"TwoIdentical": {D: c.D, Tags: `[["d","` + c.D + `"],["d","` + c.D + `"],["t","read-state"]]`},
		} {
			r.Community, r.Pubkey, r.Kind = community, randomBytes(32), 30078
			for i := range 2 { // the second, older one would be stale if the row conformed
				r.ID, r.CreatedAt = idFrom(0x40), baseTime.Add(-time.Duration(i)*time.Second)
				r.mustInsert(t, pool)
			}
			require.Equal(t, 2, rsCoord{Community: community, Pubkey: r.Pubkey, D: r.D, Kind: 30078}.rows(t, pool), name)
		}
		require.Zero(t, count(t, pool, "SELECT count(*) FROM parameterized_event_watermarks"))
	})

	t.Run("SoftDeleteOfNonconformingRowKeepsHistory", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		r := rsRow{Community: community, ID: idFrom(0x40), Pubkey: randomBytes(32), CreatedAt: baseTime, Kind: 30078,
			D: "com.example.settings", Tags: `[["d","com.example.settings"]]`}
		r.mustInsert(t, pool)
		r.mustMention(t, pool)
		_, err := pool.Exec(ctx, "UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2", community, r.ID)
		require.NoError(t, err)
		require.Equal(t, "deleted", rowState(t, pool, r))
		require.Equal(t, 1, mentions(t, pool, r))
	})

	t.Run("SoftDeleteOfConformingRowIsPhysical", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		c := newCoord(community)
		head := c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)
		head.mustMention(t, pool)
		head.mustMention(t, pool)
		bystander := newCoord(community).row(baseTime, idFrom(0x41)).mustInsert(t, pool)
		bystander.mustMention(t, pool)

		tag, err := pool.Exec(ctx, "UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2", community, head.ID)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
		require.Equal(t, "gone", rowState(t, pool, head))
		require.Zero(t, mentions(t, pool, head))
		c.requireWatermark(t, pool, head)
		require.Equal(t, "live", rowState(t, pool, bystander))
		require.Equal(t, 1, mentions(t, pool, bystander))
	})
}

// The hard-delete fence (docs/PROTOCOL.md §14.3).
func TestReadStateHardDeleteFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeleteWithoutOptInRefused", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		c := newCoord(community)
		conforming := c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)
		conforming.mustMention(t, pool)
		// Nonconforming (two exact t tags) at a read-state coordinate.
		nc := newCoord(community)
		nonconforming := nc.row(baseTime, idFrom(0x40))
		nonconforming.Tags = `[["d","` + nc.D + `"],["t","read-state"],["t","read-state"]]`
		nonconforming.mustInsert(t, pool)
		nonconforming.mustMention(t, pool)

		for _, r := range []rsRow{conforming, nonconforming} {
			_, err := pool.Exec(ctx, "DELETE FROM events WHERE community_id = $1 AND id = $2", community, r.ID)
			requirePgError(t, err, "23514", fenceText)
			require.True(t, pg.IsHardDeleteFence(err))
			require.False(t, pg.IsStaleWatermark(err))
			require.Equal(t, "live", rowState(t, pool, r))
			require.Equal(t, 1, mentions(t, pool, r))
		}

		// A value other than exactly 'on' is no opt-in.
		for _, v := range []string{"true", "ON", "1", ""} {
			err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SELECT set_config('buzz.nip_rs_hard_delete', $1, true)", v); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "DELETE FROM events WHERE community_id = $1 AND id = $2", community, conforming.ID)
				return err
			})
			require.True(t, pg.IsHardDeleteFence(err), "value %q: %v", v, err)
		}
		require.Equal(t, "live", rowState(t, pool, conforming))

		// The entitled writer's opt-in.
		err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('buzz.nip_rs_hard_delete', 'on', true)"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "DELETE FROM events WHERE community_id = $1 AND id = ANY($2)", community,
				[][]byte{conforming.ID, nonconforming.ID})
			return err
		})
		require.NoError(t, err)
		require.Equal(t, "gone", rowState(t, pool, conforming))
		require.Equal(t, "gone", rowState(t, pool, nonconforming))
	})

	t.Run("OtherRowsDeleteNormally", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		slot := rsSlot()
		for _, r := range []rsRow{
			// Kind 30023 with a read-state-shaped d.
			{Kind: 30023, D: slot, Tags: rsTags(slot)},
			// Application data of kind 30078.
			{Kind: 30078, D: "com.example.settings", Tags: `[["d","com.example.settings"]]`},
			// A lookalike whose d is not a read-state slot.
			{Kind: 30078, D: "read-state:0123456789ABCDEF0123456789ABCDEF", Tags: rsTags("read-state:0123456789ABCDEF0123456789ABCDEF")},
		} {
			r.Community, r.ID, r.Pubkey, r.CreatedAt = community, idFrom(0x40), randomBytes(32), baseTime
			r.mustInsert(t, pool)
			tag, err := pool.Exec(ctx, "DELETE FROM events WHERE community_id = $1 AND id = $2", community, r.ID)
			require.NoError(t, err, "kind %d d %s", r.Kind, r.D)
			require.EqualValues(t, 1, tag.RowsAffected())
		}
	})

	// An older binary that hard-deletes the head while replacing it.
	t.Run("OldWriterReplacementRollsBackWhole", func(t *testing.T) {
		t.Parallel()
		pool, community := readStatePool(t)
		c := newCoord(community)
		prior := c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)
		prior.mustMention(t, pool)
		next := c.row(baseTime.Add(time.Second), idFrom(0x40))

		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		next.mustInsert(t, tx)
		next.mustMention(t, tx)
		_, err = tx.Exec(ctx, "DELETE FROM event_mentions WHERE community_id = $1 AND event_id = $2", community, prior.ID)
		require.NoError(t, err, "mention rows carry no fence")
		_, err = tx.Exec(ctx, "DELETE FROM events WHERE community_id = $1 AND id = $2", community, prior.ID)
		require.True(t, pg.IsHardDeleteFence(err), "%v", err)
		require.Error(t, tx.Commit(ctx), "the transaction is aborted")

		require.Equal(t, "live", rowState(t, pool, prior))
		require.Equal(t, 1, mentions(t, pool, prior))
		require.Equal(t, "gone", rowState(t, pool, next))
		require.Zero(t, mentions(t, pool, next))
		c.requireWatermark(t, pool, prior)
	})
}

// The hard-delete opt-in (docs/PROTOCOL.md §14.3): it never outlives its transaction, and the purge
// trigger gives back the value it found.
func TestReadStateHardDeleteSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, url := dbtest.NewDB(t)
	community := newCommunity(t, pool)

	setting := func(t *testing.T, q pg.Querier) *string {
		t.Helper()
		var v *string
		require.NoError(t, q.QueryRow(ctx, "SELECT current_setting('buzz.nip_rs_hard_delete', true)").Scan(&v))
		return v
	}

	t.Run("ClearedAfterCommitAndRollback", func(t *testing.T) {
		t.Parallel()
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		for _, end := range []string{"COMMIT", "ROLLBACK"} {
			_, err := conn.Exec(ctx, "BEGIN")
			require.NoError(t, err)
			_, err = conn.Exec(ctx, "SELECT set_config('buzz.nip_rs_hard_delete', 'on', true)")
			require.NoError(t, err)
			require.Equal(t, "on", *setting(t, conn))
			_, err = conn.Exec(ctx, end)
			require.NoError(t, err)
			if v := setting(t, conn); v != nil {
				require.NotEqual(t, "on", *v, "after %s", end)
			}
		}
	})

	t.Run("PurgeRestoresThePriorValue", func(t *testing.T) {
		t.Parallel()
		for _, prior := range []*string{nil, ptr(""), ptr("off"), ptr("on")} {
			// A session of its own, so "unset" is really unset.
			conn, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			if prior == nil {
				require.Nil(t, setting(t, conn))
			}

			r := newCoord(community).row(baseTime, idFrom(0x40)).mustInsert(t, conn)
			r.mustMention(t, conn)
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			if prior != nil {
				_, err = tx.Exec(ctx, "SELECT set_config('buzz.nip_rs_hard_delete', $1, true)", *prior)
				require.NoError(t, err)
			}
			_, err = tx.Exec(ctx, "UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2", community, r.ID)
			require.NoError(t, err)
			require.Equal(t, "gone", rowState(t, tx, r), "purged inside the transaction")
			require.Zero(t, mentions(t, tx, r))
			want := ""
			if prior != nil {
				want = *prior
			}
			got := setting(t, tx)
			require.NotNil(t, got)
			require.Equal(t, want, *got, "prior %v", prior)
			// Back to the prior value means: without an opt-in of its own, the
			// transaction still meets the fence.
			if want != "on" {
				other := newCoord(community).row(baseTime, idFrom(0x40))
				_, err = other.insert(ctx, tx)
				require.NoError(t, err)
				_, err = tx.Exec(ctx, "DELETE FROM events WHERE community_id = $1 AND id = $2", community, other.ID)
				require.True(t, pg.IsHardDeleteFence(err), "prior %v: %v", prior, err)
			}
			require.NoError(t, tx.Rollback(ctx))
			require.NoError(t, conn.Close(ctx))
		}
	})
}

func ptr[T any](v T) *T { return &v }

// The mention fence of docs/PROTOCOL.md §14.3.
func TestReadStateMentionFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, community := readStatePool(t)

	c := newCoord(community)
	replaced := c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)
	// An older binary's replacement: soft delete (made physical), then insert.
	_, err := pool.Exec(ctx, "UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2", community, replaced.ID)
	require.NoError(t, err)
	head := c.row(baseTime.Add(time.Second), idFrom(0x40)).mustInsert(t, pool)

	tag, err := replaced.mention(ctx, pool)
	require.NoError(t, err, "a late mention row of a replaced payload")
	require.Zero(t, tag.RowsAffected())
	require.Zero(t, mentions(t, pool, replaced))

	tag, err = head.mention(ctx, pool)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the live head")

	// A soft-deleted kind 30078 payload (application data keeps its row).
	app := rsRow{Community: community, ID: idFrom(0x40), Pubkey: randomBytes(32), CreatedAt: baseTime, Kind: 30078,
		D: "com.example.settings", Tags: `[["d","com.example.settings"]]`, Deleted: true}
	app.mustInsert(t, pool)
	tag, err = app.mention(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, tag.RowsAffected())

	// A mention row must match the payload's created_at too.
	moved := head
	moved.CreatedAt = head.CreatedAt.Add(time.Hour)
	tag, err = moved.mention(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, tag.RowsAffected())

	// Other kinds and a NULL event_kind never reach the fence (mention rows
	// carry no foreign key).
	missing := rsRow{Community: community, ID: idFrom(0x40), CreatedAt: baseTime, Kind: 1}
	missing.mustMention(t, pool)
	tag, err = pool.Exec(ctx, `INSERT INTO event_mentions (community_id, pubkey_hex, event_id, event_created_at)
		VALUES ($1, $2, $3, $4)`, community, "ab", idFrom(0x40), baseTime)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}
