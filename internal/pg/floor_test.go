package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

// floorBundle is a database with two pools on it: armed sets the 960 s
// floor on every connection, as the relay's writer pool does; plain is the
// unarmed pool of tests and operator commands.
type floorBundle struct {
	armed, plain *pgxpool.Pool
	community    string
	channel      string
}

func floorSetup(t *testing.T) *floorBundle {
	t.Helper()
	plain, url := dbtest.NewDB(t)
	armed, err := pg.Open(context.Background(), url, pg.PoolConfig{MaxConns: 2, CreatedAtFloor: 960 * time.Second})
	require.NoError(t, err)
	t.Cleanup(armed.Close)
	return &floorBundle{armed: armed, plain: plain, community: newCommunity(t, plain),
		channel: "0b6f2c1e-4d0e-4a8e-9c7b-2f1d3e4a5b6c"}
}

// insert stores one kind 9 row created age ago, in channel (nil: none).
func (b *floorBundle) insert(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, age time.Duration, channel *string) ([]byte, error) {
	id := randomBytes(32)
	_, err := q.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
		VALUES ($1, $2, $3, now() - make_interval(secs => $4), 9, '[]', 'x', $5, $6)`,
		b.community, id, randomBytes(32), age.Seconds(), randomBytes(64), channel)
	return id, err
}

// The commit-time created_at floor of docs/PROTOCOL.md §16.6.
func TestCreatedAtFloor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OldChannelRowRefusedAtCommit", func(t *testing.T) {
		t.Parallel()
		b := floorSetup(t)
		tx, err := b.armed.Begin(ctx)
		require.NoError(t, err)
		_, err = b.insert(ctx, tx, 1000*time.Second, &b.channel)
		require.NoError(t, err, "the trigger is deferred: the INSERT itself passes")
		err = tx.Commit(ctx)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "23514", pgErr.Code)
		require.Equal(t, "events_created_at_floor", pgErr.ConstraintName)
		require.True(t, pg.IsCreatedAtFloor(err))

		// Without a transaction (the ingest hot path) the statement's
		// implicit commit fails the same way.
		_, err = b.insert(ctx, b.armed, 1000*time.Second, &b.channel)
		require.True(t, pg.IsCreatedAtFloor(err), "%v", err)
		var n int
		require.NoError(t, b.plain.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&n))
		require.Zero(t, n)
	})

	t.Run("RecentChannelRowAllowed", func(t *testing.T) {
		t.Parallel()
		b := floorSetup(t)
		_, err := b.insert(ctx, b.armed, 900*time.Second, &b.channel)
		require.NoError(t, err)
	})

	t.Run("ChannelLessRowAllowed", func(t *testing.T) {
		t.Parallel()
		b := floorSetup(t)
		_, err := b.insert(ctx, b.armed, time.Hour, nil)
		require.NoError(t, err)
	})

	t.Run("UnarmedConnectionAllowed", func(t *testing.T) {
		t.Parallel()
		b := floorSetup(t)
		_, err := b.insert(ctx, b.plain, time.Hour, &b.channel)
		require.NoError(t, err)
		var setting *string
		require.NoError(t, b.plain.QueryRow(ctx, "SELECT current_setting('buzz.created_at_floor', true)").Scan(&setting))
		require.Nil(t, setting)
		require.NoError(t, b.armed.QueryRow(ctx, "SELECT current_setting('buzz.created_at_floor', true)").Scan(&setting))
		require.Equal(t, "960", *setting)
	})

	t.Run("SoftDeleteOfOldRowAllowed", func(t *testing.T) {
		t.Parallel()
		b := floorSetup(t)
		id, err := b.insert(ctx, b.plain, time.Hour, &b.channel)
		require.NoError(t, err)
		_, err = b.armed.Exec(ctx, "UPDATE events SET deleted_at = now() WHERE id = $1", id)
		require.NoError(t, err)
		// Moving an old row into a channel is an insertion into it.
		other, err := b.insert(ctx, b.plain, time.Hour, nil)
		require.NoError(t, err)
		_, err = b.armed.Exec(ctx, "UPDATE events SET channel_id = $2 WHERE id = $1", other, b.channel)
		require.True(t, pg.IsCreatedAtFloor(err), "%v", err)
	})

	t.Run("PartitionCreatedLaterIsGuarded", func(t *testing.T) {
		t.Parallel()
		b := floorSetup(t)
		// A month partition made after the migration gets the trigger too.
		require.NoError(t, pg.EnsurePartitions(ctx, b.plain, time.Now(), 1))
		_, err := b.insert(ctx, b.armed, 1000*time.Second, &b.channel)
		require.True(t, pg.IsCreatedAtFloor(err), "%v", err)
		var part string
		_, err = b.insert(ctx, b.plain, 1000*time.Second, &b.channel)
		require.NoError(t, err)
		require.NoError(t, b.plain.QueryRow(ctx, "SELECT tableoid::regclass::text FROM events").Scan(&part))
		require.NotEqual(t, "events_p_default", part)
	})
}

func TestPoolSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StatementTimeoutOnEveryConnection", func(t *testing.T) {
		t.Parallel()
		_, url := dbtest.NewDB(t)
		pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 2, StatementTimeout: 2 * time.Second})
		require.NoError(t, err)
		defer pool.Close()
		a, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer a.Release()
		b, err := pool.Acquire(ctx) // a second, new connection
		require.NoError(t, err)
		defer b.Release()
		for _, c := range []*pgxpool.Conn{a, b} {
			var v string
			require.NoError(t, c.QueryRow(ctx, "SHOW statement_timeout").Scan(&v))
			require.Equal(t, "2s", v)
		}
	})

	// An AsyncCommit pool's commits return before their WAL is flushed;
	// FlushCommits flushes past them, whatever the server's own setting
	// (off in the test cluster).
	t.Run("AsyncCommitThenFlush", func(t *testing.T) {
		t.Parallel()
		plain, url := dbtest.NewDB(t)
		fast, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1, AsyncCommit: true})
		require.NoError(t, err)
		defer fast.Close()
		var v string
		require.NoError(t, fast.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v))
		require.Equal(t, "off", v)
		_, err = fast.Exec(ctx, "CREATE TABLE async_commit (n int); INSERT INTO async_commit SELECT generate_series(1, 1000)")
		require.NoError(t, err)
		var committed string
		require.NoError(t, fast.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&committed))
		require.NoError(t, pg.FlushCommits(ctx, plain))
		var flushed bool
		require.NoError(t, plain.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn", committed).Scan(&flushed))
		require.True(t, flushed, "the WAL is flushed past the async commit")
	})

	// The writer's GIN pending lists stay short: inserts merge them into
	// their indexes once past 64 kB, where PostgreSQL's default lets them
	// grow to 4 MB, and every GIN search reads the whole list.
	t.Run("ShortGINPendingLists", func(t *testing.T) {
		t.Parallel()
		plain, url := dbtest.NewDB(t)
		writer, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1, GINPendingListKB: pg.WriterGINPendingListKB})
		require.NoError(t, err)
		defer writer.Close()
		var v string
		require.NoError(t, writer.QueryRow(ctx, "SHOW gin_pending_list_limit").Scan(&v))
		require.Equal(t, "64kB", v)
		community := newCommunity(t, plain)
		pending := func(q interface {
			Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
			QueryRow(context.Context, string, ...any) pgx.Row
		}, from int) int {
			_, err := q.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
				SELECT $1, decode(md5(i::text) || md5((-i)::text), 'hex'), decode(md5('p') || md5('k'), 'hex'), now(), 1,
				  jsonb_build_array(jsonb_build_array('e', md5(i::text) || md5(i::text)), jsonb_build_array('t', 'tag' || i)),
				  'note ' || i, decode(repeat(md5(i::text), 4), 'hex')
				FROM generate_series($2::int, $2::int + 1999) AS i`, community, from)
			require.NoError(t, err)
			var pages int
			require.NoError(t, q.QueryRow(ctx, `SELECT COALESCE(sum(gin_clean_pending_list(i.inhrelid::regclass)), 0)::int
				FROM pg_inherits i WHERE i.inhparent = 'idx_events_tags_gin'::regclass`).Scan(&pages))
			return pages
		}
		require.LessOrEqual(t, pending(writer, 0), 64/8+1, "at most 64 kB left pending")
		require.Greater(t, pending(plain, 10000), 64/8+1, "the same inserts with the default limit leave more")
	})

	t.Run("LazyOpensWithoutAServer", func(t *testing.T) {
		t.Parallel()
		pool, err := pg.Open(ctx, "postgres://u@/db?host="+t.TempDir(), pg.PoolConfig{Lazy: true, AcquireTimeout: time.Second})
		require.NoError(t, err)
		defer pool.Close()
		require.Error(t, pool.Ping(ctx))
	})
}
