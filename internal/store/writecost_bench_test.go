package store_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

// BenchmarkWriteCost is what the indexes and the trigger on the tables an
// ingested event writes cost that write (docs/PERFORMANCE.md
// "What each index and trigger costs an insert"). Every sub-benchmark
// stores kind 9 events in an open channel (an h, a root e and a p tag, ten
// words, an audit intent: the side-by-side run's shape) through
// EventInsertBatch in batches of 8, on a fresh database from which it first
// removes one group of indexes ("floor_armed" instead arms the created_at
// floor); "all" and "control" remove nothing. One op is one event; pg-cpu-µs/op is the CPU
// the one PostgreSQL backend used (user and system, from /proc), which
// moves less than the wall time. Run it several times rather than with
// -count, so that drift spreads over every variant:
//
//	for i in 1 2 3; do go test -run '^$' -bench BenchmarkWriteCost -benchtime 20000x ./internal/store/; done
func BenchmarkWriteCost(b *testing.B) {
	variants := []struct{ name, sql string }{
		{"all", ""},
		// Drops nothing either: the spread between it and "all" is the noise.
		{"control", "DROP INDEX IF EXISTS no_such_index"},
		{"events_btrees", `DROP INDEX idx_events_community_id, idx_events_community_channel_created,
			idx_events_community_pubkey_kind_created, idx_events_community_kind_created, idx_events_community_deleted,
			idx_events_addressable, idx_events_parameterized`},
		{"events_tags_gin", "DROP INDEX idx_events_tags_gin"},
		{"events_search_gins", "DROP INDEX idx_events_search_tsv, idx_events_search_day_keys"},
		{"mentions_indexes", `DROP INDEX idx_event_mentions_pubkey_created, idx_event_mentions_pubkey_kind_created,
			idx_event_mentions_community_event`},
		{"audit_outbox_occurred", "DROP INDEX idx_audit_outbox_occurred"},
		// The GIN pending lists kept short, as on the relay's writer pool
		// (pg.WriterGINPendingListKB), and PostgreSQL's default (4 MB), which
		// the other variants use.
		{"gin_pending_64kB", "SET gin_pending_list_limit = 64"},
		// Adds work: the created_at floor armed, as on a writer with a read replica.
		{"floor_armed", "SET buzz.created_at_floor = '960'"},
		// Adds back what migration 0012 removed: the foreign keys to
		// communities and the floor trigger queued for every channel row.
		{"before_0012", `ALTER TABLE events ADD FOREIGN KEY (community_id) REFERENCES communities (id);
			ALTER TABLE event_mentions ADD FOREIGN KEY (community_id) REFERENCES communities (id);
			ALTER TABLE audit_outbox ADD FOREIGN KEY (community_id) REFERENCES communities (id);
			DROP TRIGGER events_created_at_floor ON events;
			CREATE CONSTRAINT TRIGGER events_created_at_floor AFTER INSERT OR UPDATE OF created_at, channel_id ON events
			  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.channel_id IS NOT NULL)
			  EXECUTE FUNCTION events_created_at_floor_guard()`},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			pool, _ := dbtest.NewDB(b)
			cid := fixture.Community(b, pool).ID
			author, other := eventtest.NewKey(), eventtest.NewKey()
			ch := fixture.Channel(b, pool, cid, author)
			root := strings.Repeat("ab", 32)
			conn, err := pool.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Release()
			if v.sql != "" {
				if _, err := conn.Exec(ctx, v.sql); err != nil {
					b.Fatal(err)
				}
			}
			var backend int
			if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
				b.Fatal(err)
			}
			s := store.New(conn)
			const batch = 8
			ps := make([]store.EventInsertParams, 0, batch)
			words := strings.Fields("latency throughput cache memory disk network socket relay event filter")
			flush := func() {
				if len(ps) == 0 {
					return
				}
				if _, err := s.EventInsertBatch(ctx, ps); err != nil {
					b.Fatal(err)
				}
				ps = ps[:0]
			}
			evs := make([]event.Event, b.N)
			for i := range evs {
				evs[i] = author.Signed(b, event.KindStreamMessage, eventtest.Channel(ch), eventtest.Tag("e", root, "", "root"),
					eventtest.Tag("p", other.PubKey), eventtest.Content(strings.Join(words[i%3:], " ")+" #"+strconv.Itoa(i)))
			}
			b.ResetTimer()
			cpu0 := backendCPU(b, backend)
			for i := range evs {
				obj := evs[i].ID
				ps = append(ps, store.EventInsertParams{CommunityID: cid, Event: &evs[i], Channel: ch,
					Audit: &store.OutboxIntent{DedupeKey: "event_created:" + obj, Action: "event_created",
						ObjectID: &obj, Detail: []byte(`{"event_kind":9}`)}})
				if len(ps) == batch {
					flush()
				}
			}
			flush()
			b.ReportMetric(float64((backendCPU(b, backend)-cpu0).Microseconds())/float64(b.N), "pg-cpu-µs/op")
		})
	}
}

// backendCPU is the CPU time a PostgreSQL backend of the test cluster (a
// process of this machine) has used, user and system, from /proc.
func backendCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are the 12th and 13th of them, in clock ticks (100 a second).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("stat of %d: %s", pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
