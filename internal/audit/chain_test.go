package audit_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

type testBundle struct {
	pool    *pgxpool.Pool
	url     string
	chainer *audit.Chainer
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, url := dbtest.NewDB(t)
	b := &testBundle{pool: pool, url: url}
	b.chainer = audit.NewChainer(audit.ChainerConfig{Pool: pool,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	b.chainer.TestSignals.Init()
	return b
}

func (b *testBundle) community(t *testing.T, host string) string {
	t.Helper()
	var id string
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO communities (host) VALUES ($1) RETURNING id::text`, host).Scan(&id))
	return id
}

// intent writes one event_created intent in its own transaction.
func (b *testBundle) intent(t *testing.T, cid string, kind int) audit.Intent {
	t.Helper()
	key := eventtest.NewKey()
	ev := key.Signed(t, kind)
	in := audit.NewEventCreated(cid, key.PubKey, ev.ID, kind, "")
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		return audit.Append(context.Background(), tx, in)
	}))
	return in
}

func (b *testBundle) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.chainer.Flush(ctx))
}

func (b *testBundle) verify(t *testing.T, cid string) (bool, error) {
	t.Helper()
	return audit.Verify(context.Background(), b.pool, audit.VerifyParams{CommunityID: cid, From: 1, To: 1 << 40})
}

// exec runs statements with the append-only triggers disabled, as an owner could.
func (b *testBundle) tamper(t *testing.T, stmts ...string) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `ALTER TABLE audit_log DISABLE TRIGGER USER`); err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := tx.Exec(context.Background(), s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		_, err := tx.Exec(context.Background(), `ALTER TABLE audit_log ENABLE TRIGGER USER`)
		return err
	}))
}

type row struct {
	seq       int64
	hash      []byte
	prev      []byte
	version   int
	action    string
	actor     []byte
	objectID  *string
	createdAt time.Time
}

func rows(t *testing.T, pool *pgxpool.Pool, cid string) []row {
	t.Helper()
	rs, err := pool.Query(context.Background(), `SELECT seq, hash, prev_hash, hash_version, action, actor_pubkey, object_id, created_at
		FROM audit_log WHERE community_id = $1 ORDER BY seq`, cid)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.seq, &x.hash, &x.prev, &x.version, &x.action, &x.actor, &x.objectID, &x.createdAt)
		return x, err
	})
	require.NoError(t, err)
	return out
}

func where(cid string, seq int) string {
	return fmt.Sprintf("community_id = '%s' AND seq = %d", cid, seq)
}

func TestChain(t *testing.T) {
	t.Parallel()

	t.Run("FirstAndSecondEntry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.community(t, "a.test")
		first := b.intent(t, cid, 9)
		b.intent(t, cid, 9)
		b.flush(t)
		rs := rows(t, b.pool, cid)
		require.Len(t, rs, 2)
		require.Equal(t, int64(1), rs[0].seq)
		require.Nil(t, rs[0].prev)
		require.Len(t, rs[0].hash, 32)
		require.Equal(t, 2, rs[0].version)
		require.Equal(t, "event_created", rs[0].action)
		require.Equal(t, *first.ObjectID, *rs[0].objectID)
		require.Equal(t, int64(2), rs[1].seq)
		require.Equal(t, rs[0].hash, rs[1].prev)
		ok, err := b.verify(t, cid)
		require.NoError(t, err)
		require.True(t, ok)
		var pending int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_outbox`).Scan(&pending))
		require.Zero(t, pending)
	})

	t.Run("CommunitiesNeverLink", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ca, cb := b.community(t, "a.test"), b.community(t, "b.test")
		for range 5 {
			b.intent(t, ca, 9)
			b.intent(t, cb, 9)
		}
		b.flush(t)
		ra, rb := rows(t, b.pool, ca), rows(t, b.pool, cb)
		require.Len(t, ra, 5)
		require.Len(t, rb, 5)
		require.Equal(t, int64(1), ra[0].seq)
		require.Equal(t, int64(1), rb[0].seq)
		hashes := map[string]string{}
		for _, r := range ra {
			hashes[string(r.hash)] = "a"
		}
		for _, r := range rb {
			require.NotEqual(t, "a", hashes[string(r.prev)])
			require.NotContains(t, hashes, string(r.hash))
		}
		for _, c := range []string{ca, cb} {
			ok, err := b.verify(t, c)
			require.NoError(t, err)
			require.True(t, ok)
		}
	})

	t.Run("RowCopiedIntoAnotherCommunity", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ca, cb := b.community(t, "a.test"), b.community(t, "b.test")
		b.intent(t, ca, 9)
		b.flush(t)
		_, err := b.pool.Exec(context.Background(), `INSERT INTO audit_log
			SELECT $2, seq, hash, prev_hash, action, actor_pubkey, object_id, detail, created_at, hash_version
			FROM audit_log WHERE community_id = $1 AND seq = 1`, ca, cb)
		require.NoError(t, err)
		_, err = b.verify(t, cb)
		require.Equal(t, &audit.HashMismatch{Seq: 1}, err)
	})

	t.Run("Tampering", func(t *testing.T) { // checks 10, 11, 12, 14
		t.Parallel()
		cases := []struct {
			name  string
			stmts func(cid string) []string
			want  string
		}{
			{"ActorEdited", func(c string) []string {
				return []string{`UPDATE audit_log SET actor_pubkey = '\x` + strings.Repeat("11", 32) + `' WHERE ` + where(c, 2)}
			}, "hash mismatch at seq 2: stored hash does not match recomputed hash"},
			{"DetailEdited", func(c string) []string {
				return []string{`UPDATE audit_log SET detail = '{"event_kind":1,"channel_id":null}' WHERE ` + where(c, 4)}
			}, "hash mismatch at seq 4: stored hash does not match recomputed hash"},
			{"PrevHashRewritten", func(c string) []string {
				return []string{`UPDATE audit_log SET prev_hash = '\x` + randomHex(t) + `' WHERE ` + where(c, 3)}
			}, "hash chain integrity violation at seq 3: prev_hash does not match preceding entry"},
			{"MiddleRowDeleted", func(c string) []string { return []string{`DELETE FROM audit_log WHERE ` + where(c, 5)} },
				"hash chain integrity violation at seq 6: prev_hash does not match preceding entry"},
			{"FirstRowDeleted", func(c string) []string { return []string{`DELETE FROM audit_log WHERE ` + where(c, 1)} },
				"hash chain integrity violation at seq 2: prev_hash does not match preceding entry"},
			{"GenesisGivenPrev", func(c string) []string {
				return []string{`UPDATE audit_log SET prev_hash = '\x` + randomHex(t) + `' WHERE ` + where(c, 1)}
			}, "hash chain integrity violation at seq 1: prev_hash does not match preceding entry"},
			{"Version1", func(c string) []string { return []string{`UPDATE audit_log SET hash_version = 1 WHERE ` + where(c, 2)} },
				"unsupported audit hash version 1"},
			{"Version99", func(c string) []string {
				return []string{`UPDATE audit_log SET hash_version = 99 WHERE ` + where(c, 2)}
			},
				"unsupported audit hash version 99"},
			{"UnknownAction", func(c string) []string { return []string{`UPDATE audit_log SET action = 'bogus' WHERE ` + where(c, 7)} },
				"unknown audit action in database"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				cid := b.community(t, "a.test")
				for range 10 {
					b.intent(t, cid, 9)
				}
				b.flush(t)
				ok, err := b.verify(t, cid)
				require.NoError(t, err)
				require.True(t, ok)
				b.tamper(t, tc.stmts(cid)...)
				ok, err = b.verify(t, cid)
				require.False(t, ok)
				require.EqualError(t, err, tc.want)
				requireSanitised(t, err, cid)
			})
		}
	})

	t.Run("ChainViolationTypes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.community(t, "a.test")
		for range 10 {
			b.intent(t, cid, 9)
		}
		b.flush(t)
		b.tamper(t, `DELETE FROM audit_log WHERE `+where(cid, 5))
		_, err := b.verify(t, cid)
		require.Equal(t, &audit.ChainViolation{Seq: 6}, err)
		// A sub-range that starts after the hole is internally consistent.
		ok, err := audit.Verify(context.Background(), b.pool, audit.VerifyParams{CommunityID: cid, From: 6, To: 10})
		require.NoError(t, err)
		require.True(t, ok)
		_, err = audit.Verify(context.Background(), b.pool, audit.VerifyParams{CommunityID: cid, From: 5, To: 10})
		require.Equal(t, &audit.ChainViolation{Seq: 6}, err)
	})

	t.Run("EmptyRange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.community(t, "a.test")
		ok, err := audit.Verify(context.Background(), b.pool, audit.VerifyParams{CommunityID: cid, From: 1, To: 100})
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("AppendOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid, other := b.community(t, "a.test"), b.community(t, "b.test")
		b.intent(t, cid, 9)
		b.intent(t, other, 9)
		b.flush(t)
		ctx := context.Background()
		for _, stmt := range []string{
			`UPDATE audit_log SET action = 'event_deleted'`,
			`DELETE FROM audit_log`,
			`TRUNCATE audit_log`,
		} {
			_, err := b.pool.Exec(ctx, stmt)
			require.ErrorContains(t, err, "audit_log is append-only", stmt)
		}
		b.intent(t, cid, 9) // pending too
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return audit.Purge(ctx, tx, cid) }))
		require.Empty(t, rows(t, b.pool, cid))
		require.Len(t, rows(t, b.pool, other), 1)
		n, err := audit.PendingCount(ctx, b.pool, cid)
		require.NoError(t, err)
		require.Zero(t, n)
		_, err = b.pool.Exec(ctx, `DELETE FROM audit_log`)
		require.ErrorContains(t, err, "audit_log is append-only", "the purge flag was transaction-local")
	})

	t.Run("EveryActionShapeRoundTrips", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.community(t, "a.test")
		key := eventtest.NewKey()
		id := strings.Repeat("ab", 32)
		ch := "11111111-1111-1111-1111-111111111111"
		m := audit.MemberChange{Scope: "channel", Channel: ch, Member: key.PubKey, Role: "admin", PreviousRole: "member", Reason: "left", EventID: id}
		intents := []audit.Intent{
			audit.NewEventCreated(cid, key.PubKey, id, 9, ch),
			audit.NewEventCreated(cid, key.PubKey, strings.Repeat("cd", 32), 1, ""),
			audit.NewEventDeleted(cid, key.PubKey, id, 9, ch, strings.Repeat("ef", 32), 5),
			audit.NewChannelCreated(cid, key.PubKey, ch, "stream", "open", id),
			audit.NewChannelUpdated(cid, key.PubKey, ch, []string{"topic", "name"}, id),
			audit.NewChannelDeleted(cid, key.PubKey, ch, ""),
			audit.NewMemberAdded(cid, key.PubKey, m),
			audit.NewMemberAdded(cid, "", audit.MemberChange{Scope: "relay", Member: key.PubKey, Role: "member"}),
			audit.NewMemberRemoved(cid, key.PubKey, m),
		}
		ctx := context.Background()
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			for _, in := range intents {
				if err := audit.Append(ctx, tx, in); err != nil {
					return err
				}
			}
			// Observational shapes, including a summary with an explicit time.
			for _, in := range audit.ObservationShapes(cid, key.PubKey) {
				if err := audit.Append(ctx, tx, in); err != nil {
					return err
				}
			}
			return nil
		}))
		b.flush(t)
		ok, err := b.verify(t, cid)
		require.NoError(t, err)
		require.True(t, ok)
		require.Len(t, rows(t, b.pool, cid), len(intents)+len(audit.ObservationShapes(cid, key.PubKey)))
		var changes string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT detail->>'changes' FROM audit_log WHERE community_id = $1 AND action = 'channel_updated'`, cid).Scan(&changes))
		require.Equal(t, `["name", "topic"]`, changes)
	})

	t.Run("DuplicateIntentIsOneEntry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.community(t, "a.test")
		in := b.intent(t, cid, 9)
		require.NoError(t, audit.Append(context.Background(), b.pool, in))
		b.flush(t)
		require.Len(t, rows(t, b.pool, cid), 1)
	})
}

func randomHex(t *testing.T) string {
	t.Helper()
	var b [32]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return fmt.Sprintf("%x", b)
}

// requireSanitised checks that a report leaks no community id (either form), constraint
// or table name in an audit error's text.
func requireSanitised(t *testing.T, err error, cid string) {
	t.Helper()
	text := err.Error()
	for _, bad := range []string{cid, strings.ReplaceAll(cid, "-", ""), "community_id", "audit_log_pkey", "constraint", "communities"} {
		require.NotContains(t, text, bad)
	}
}

// Checks 15 and 27: a trigger makes audit_log inserts fail with a unique
// violation naming the primary key and the community; the batch rolls back,
// the error text is sanitised, the intents stay pending and no seq is
// consumed. Dropping the trigger chains each intent exactly once.
func TestChainerFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cid := b.community(t, "a.test")
	b.intent(t, cid, 9)
	b.flush(t)
	_, err := b.pool.Exec(ctx, `CREATE FUNCTION test_fail_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		  RAISE unique_violation USING MESSAGE = 'duplicate key value violates unique constraint "audit_log_pkey"',
		    DETAIL = 'Key (community_id, seq)=(' || NEW.community_id || ', ' || NEW.seq || ') already exists.',
		    CONSTRAINT = 'audit_log_pkey', TABLE = 'audit_log';
		END $$;
		CREATE TRIGGER test_fail_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION test_fail_audit();`)
	require.NoError(t, err)
	for range 3 {
		b.intent(t, cid, 9)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = b.chainer.Flush(fctx)
	require.EqualError(t, err, "database error: SQLSTATE 23505")
	requireSanitised(t, err, cid)
	failed := b.chainer.TestSignals.Failed.WaitOrTimeout(t)
	require.Equal(t, cid, failed.CommunityID)
	require.EqualError(t, failed.Err, "database error: SQLSTATE 23505")
	n, err := audit.PendingCount(ctx, b.pool, cid)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	ok, err := b.verify(t, cid)
	require.NoError(t, err)
	require.True(t, ok)

	_, err = b.pool.Exec(ctx, `DROP TRIGGER test_fail_audit ON audit_log`)
	require.NoError(t, err)
	b.flush(t)
	rs := rows(t, b.pool, cid)
	require.Len(t, rs, 4)
	for i, r := range rs {
		require.Equal(t, int64(i+1), r.seq)
	}
	ok, err = b.verify(t, cid)
	require.NoError(t, err)
	require.True(t, ok)
}

// Flush waits out a lock held for a moment: at shutdown the holder is the
// process's own canceled batch, or another process's flush. With the lock
// held for 300 ms, Flush chains A's intents once it is released; held for
// longer than FlushLockWait, Flush gives up and leaves them pending.
func TestFlushWaitsForAShortLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ca := b.community(t, "a.test")
	for range 3 {
		b.intent(t, ca, 9)
	}
	lock := func() pgx.Tx {
		holder, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('buzz_audit:' || $1::uuid::text, 0))`, ca)
		require.NoError(t, err)
		return holder
	}

	holder := lock()
	time.AfterFunc(300*time.Millisecond, func() { _ = holder.Rollback(ctx) })
	start := time.Now()
	b.flush(t)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Len(t, rows(t, b.pool, ca), 3)

	b.intent(t, ca, 9)
	holder = lock()
	defer func() { _ = holder.Rollback(ctx) }()
	start = time.Now()
	b.flush(t)
	took := time.Since(start)
	require.GreaterOrEqual(t, took, audit.FlushLockWait)
	require.Less(t, took, audit.FlushLockWait+5*time.Second)
	n, err := audit.PendingCount(ctx, b.pool, ca)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "still locked: left for the holder")
}

// While a connection holds community A's advisory lock, B's
// entries keep being chained and the outbox lag grows; after the release A
// catches up and the lag returns to 0.
func TestChainerCommunitiesNeverContend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ca, cb := b.community(t, "a.test"), b.community(t, "b.test")

	var key int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT hashtextextended('buzz_audit:' || $1::uuid::text, 0)`, "00000000-0000-0000-0000-000000000001").Scan(&key))
	require.Equal(t, int64(-2642062752538308840), key, "the lock key of docs/PROTOCOL.md §13.5")

	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('buzz_audit:' || $1::uuid::text, 0))`, ca)
	require.NoError(t, err)

	require.NoError(t, b.chainer.Start(ctx))
	defer b.chainer.Stop()

	b.intent(t, ca, 9)
	b.intent(t, cb, 9)
	b.chainer.Wake()
	waitChained(t, b.chainer, cb, time.Second)
	b.intent(t, cb, 9)
	b.chainer.Wake()
	waitChained(t, b.chainer, cb, time.Second)
	require.Len(t, rows(t, b.pool, cb), 2)
	require.Empty(t, rows(t, b.pool, ca))
	_, lag1, err := audit.OutboxStats(ctx, b.pool)
	require.NoError(t, err)
	_, lag2, err := audit.OutboxStats(ctx, b.pool)
	require.NoError(t, err)
	require.Greater(t, lag2, lag1, "A's intent is waiting: the lag grows")

	require.NoError(t, holder.Rollback(ctx))
	b.chainer.Wake()
	waitChained(t, b.chainer, ca, 5*time.Second)
	require.Len(t, rows(t, b.pool, ca), 1)
	pending, lag, err := audit.OutboxStats(ctx, b.pool)
	require.NoError(t, err)
	require.Zero(t, pending)
	require.Zero(t, lag)
}

// waitChained waits until a batch of community cid was committed.
func waitChained(t *testing.T, c *audit.Chainer, cid string, d time.Duration) audit.ChainedBatch {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case got := <-c.TestSignals.Chained.WaitC():
			if got.CommunityID == cid {
				return got
			}
		case <-timeout:
			t.Fatalf("community %s not chained within %s", cid, d)
		}
	}
}

// The chainer's scan for work lists every community with pending intents
// once, the one whose oldest intent is oldest first, whatever the order of
// their ids, and none whose intents were all chained.
func TestChainerPendingOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ids []string
	for _, h := range []string{"a.test", "b.test", "c.test", "d.test", "e.test", "f.test", "g.test"} {
		ids = append(ids, b.community(t, h))
	}
	got, err := b.chainer.PendingCommunities(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	order := []string{ids[2], ids[0], ids[5], ids[3], ids[6], ids[1]} // ids[4] has none
	for _, cid := range order {
		b.intent(t, cid, 9)
	}
	for _, cid := range order { // later intents do not move a community
		b.intent(t, cid, 9)
	}
	got, err = b.chainer.PendingCommunities(ctx)
	require.NoError(t, err)
	require.Equal(t, order, got)
	b.flush(t)
	got, err = b.chainer.PendingCommunities(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
}

// The chainer as a service: it chains on its poll interval without a
// wake-up, reports each batch, and Start and Stop are safe twice.
func TestChainerService(t *testing.T) {
	t.Parallel()

	t.Run("ChainsOnPollWithoutWake", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.community(t, "a.test")
		// Both intents are there before the chainer starts: a poll between
		// them would chain them in two batches.
		b.intent(t, cid, 9)
		b.intent(t, cid, 9)
		require.NoError(t, b.chainer.Start(context.Background()))
		require.NoError(t, b.chainer.Start(context.Background()))
		defer b.chainer.Stop()
		got := waitChained(t, b.chainer, cid, 10*audit.PollInterval)
		require.Equal(t, audit.ChainedBatch{CommunityID: cid, N: 2, Head: 2}, got)
		require.Len(t, rows(t, b.pool, cid), 2)
	})

	// A wake-up waits GatherDelay before its pass, and the pass chains the
	// intents committed meanwhile in the same batch: under load batches grow
	// with the rate instead of holding one intent each.
	t.Run("WakeGathersTheCommitsThatFollow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.community(t, "a.test")
		require.NoError(t, b.chainer.Start(context.Background()))
		defer b.chainer.Stop()
		b.intent(t, cid, 9)
		woke := time.Now()
		b.chainer.Wake()
		b.intent(t, cid, 9)
		committed := time.Since(woke)
		got := waitChained(t, b.chainer, cid, 10*audit.PollInterval)
		chained := time.Since(woke)
		require.GreaterOrEqual(t, chained, audit.GatherDelay, "the pass waited for the commits that follow the wake-up")
		if committed < audit.GatherDelay {
			require.Equal(t, audit.ChainedBatch{CommunityID: cid, N: 2, Head: 2}, got, "the intent committed %s after the wake-up", committed)
		} else { // a machine too busy to commit an intent within the delay
			t.Logf("an intent took %s to commit, more than the gather delay; first batch %+v", committed, got)
		}
	})

	t.Run("StopTwiceThenFlush", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.community(t, "a.test")
		require.NoError(t, b.chainer.Start(context.Background()))
		b.chainer.Stop()
		b.chainer.Stop()
		require.False(t, b.chainer.Running())
		b.intent(t, cid, 9)
		b.chainer.Wake() // no loop: nothing chains, and Wake never blocks
		b.chainer.Wake()
		n, err := audit.PendingCount(context.Background(), b.pool, cid)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		b.flush(t)
		require.Equal(t, audit.ChainedBatch{CommunityID: cid, N: 1, Head: 1}, b.chainer.TestSignals.Chained.WaitOrTimeout(t))
		b.chainer.TestSignals.Chained.RequireEmpty(t)
	})
}
