package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// rsReport is a migrated database holding read-state rows and purge
// records for two communities, and the lines the report must print.
type rsReport struct {
	*cliBundle
	pool *pgxpool.Pool
	// Lines are the community lines, host ascending.
	Lines []map[string]any
}

func setupReadState(t *testing.T) *rsReport {
	t.Helper()
	ctx := context.Background()
	b := &rsReport{cliBundle: setupCLI(t)}
	var err error
	b.pool, err = pgxpool.New(ctx, b.env["DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(b.pool.Close)
	// Added first, listed last: the report goes by host.
	b.mustRun(t, "community", "add", "--host", "zz.test")
	rs := b.mustRun(t, "community", "add", "--host", "rs.test").lines(t)[0]["community_id"].(string)
	b.mustRun(t, "community", "add-host", "--host", "alias.rs.test", "--to", "rs.test")

	pub := make([]byte, 32)
	_, _ = rand.Read(pub)
	for i := range 3 {
		slot := make([]byte, 16)
		_, _ = rand.Read(slot)
		d := "read-state:" + hex.EncodeToString(slot)
		id, sig := make([]byte, 32), make([]byte, 64)
		_, _ = rand.Read(id)
		_, err := b.pool.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag)
			VALUES ($1, $2, $3, $4, 30078, $5::jsonb, 'ciphertext', $6, $7)`,
			rs, id, pub, time.Now().Add(-time.Duration(i)*time.Minute), fmt.Sprintf(`[["d",%q],["t","read-state"]]`, d), sig, d)
		require.NoError(t, err)
	}
	// What a purge recorded: one record on the default partition as it is
	// now, one on a file that has since been rewritten.
	_, err = b.pool.Exec(ctx, `INSERT INTO read_state_retention_purges
		(community_id, partition_name, partition_filenode, purged_at, purged_rows, purged_payload_bytes) VALUES
		($1, 'events_p_default', pg_relation_filenode('events_p_default'), now(), 4, 300),
		($1, 'events_p_default', 1, now() - interval '1 day', 2, 120)`, rs)
	require.NoError(t, err)
	b.Lines = []map[string]any{
		{"community": "rs.test", "coordinates": 3.0, "live_rows": 3.0, "watermarks": 3.0, "retained_deleted": 0.0,
			"purged_rows": 6.0, "purged_bytes": 420.0, "est_reclaimable_bytes": 300.0},
		{"community": "zz.test", "coordinates": 0.0, "live_rows": 0.0, "watermarks": 0.0, "retained_deleted": 0.0,
			"purged_rows": 0.0, "purged_bytes": 0.0, "est_reclaimable_bytes": 0.0},
	}
	return b
}

// partitions lists the partitions of events by name.
func (b *rsReport) partitions(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT c.relname::text FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireStorageLines checks one storage line per events partition, in
// order, with the keys of docs/PROTOCOL.md §14.7.
func requireStorageLines(t *testing.T, lines []map[string]any, partitions []string) {
	t.Helper()
	require.Len(t, lines, len(partitions))
	for i, l := range lines {
		require.ElementsMatch(t, []string{"storage", "heap_bytes", "toast_bytes", "est_free_bytes", "method"}, keys(l))
		require.Equal(t, partitions[i], l["storage"])
		require.Equal(t, "statistics", l["method"], "no pgstattuple in a fresh database")
		for _, k := range []string{"heap_bytes", "toast_bytes", "est_free_bytes"} {
			require.GreaterOrEqual(t, l[k].(float64), 0.0, k)
		}
	}
}

// docs/PROTOCOL.md §14.7: maintenance read-state --report.
func TestReadStateCommand(t *testing.T) {
	t.Parallel()

	t.Run("JSONLines", func(t *testing.T) {
		t.Parallel()
		b := setupReadState(t)
		res := b.mustRun(t, "maintenance", "read-state", "--report")
		require.Empty(t, res.Stderr)
		lines := res.lines(t)
		require.Equal(t, b.Lines, lines[:2], "communities first, host ascending")
		requireStorageLines(t, lines[2:], b.partitions(t))
	})

	t.Run("OneCommunity", func(t *testing.T) {
		t.Parallel()
		b := setupReadState(t)
		for _, host := range []string{"rs.test", "ALIAS.rs.test."} {
			lines := b.mustRun(t, "maintenance", "read-state", "--report", "--community", host).lines(t)
			require.Equal(t, b.Lines[:1], lines[:1], host)
			requireStorageLines(t, lines[1:], b.partitions(t))
		}
	})

	t.Run("Text", func(t *testing.T) {
		t.Parallel()
		b := setupReadState(t)
		res := b.mustRun(t, "maintenance", "read-state", "--report", "--text")
		require.Empty(t, res.Stderr)
		tables := strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n\n")
		require.Len(t, tables, 2, "communities, then storage:\n%s", res.Stdout)

		com := strings.Split(tables[0], "\n")
		require.Len(t, com, 3)
		header := []string{"community", "coordinates", "live_rows", "watermarks", "retained_deleted", "purged_rows", "purged_bytes", "est_reclaimable_bytes"}
		require.Equal(t, header, strings.Fields(com[0]))
		for i, want := range b.Lines {
			row := []string{want["community"].(string)}
			for _, k := range header[1:] {
				row = append(row, strconv.Itoa(int(want[k].(float64))))
			}
			require.Equal(t, row, strings.Fields(com[i+1]))
			requireAligned(t, com[0], com[i+1])
		}

		st := strings.Split(tables[1], "\n")
		require.Equal(t, []string{"storage", "heap_bytes", "toast_bytes", "est_free_bytes", "method"}, strings.Fields(st[0]))
		parts := b.partitions(t)
		require.Len(t, st, 1+len(parts))
		for i, p := range parts {
			f := strings.Fields(st[i+1])
			require.Len(t, f, 5)
			require.Equal(t, p, f[0])
			require.Equal(t, "statistics", f[4])
			requireAligned(t, st[0], st[i+1])
		}
	})

	t.Run("UnknownCommunity", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		res := b.run(t, "maintenance", "read-state", "--report", "--community", "nowhere.test")
		require.Equal(t, 2, res.Code)
		require.Equal(t, "buzz-relay maintenance read-state: no community is configured for host nowhere.test\n", res.Stderr)
		require.Empty(t, res.Stdout)
	})

	t.Run("UsageErrors", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		for _, args := range [][]string{
			{"maintenance", "read-state"},
			{"maintenance", "read-state", "--text"},
			{"maintenance", "read-state", "--report", "extra"},
			{"maintenance", "read-state", "--report", "--community", " "},
			{"maintenance", "read-state", "--report", "--bogus"},
			{"maintenance", "read-state", "--report", "--statement-timeout", "0s"},
		} {
			res := b.run(t, args...)
			require.Equal(t, 2, res.Code, "buzz-relay %v", args)
			require.Contains(t, res.Stderr, "buzz-relay maintenance read-state: ", "buzz-relay %v", args)
			require.Contains(t, res.Stderr, "(see: buzz-relay maintenance read-state --help)", "buzz-relay %v", args)
			require.Empty(t, res.Stdout, "buzz-relay %v", args)
		}
		res := b.run(t, "maintenance", "read-state")
		require.Contains(t, res.Stderr, "missing --report")
		res = b.run(t, "maintenance", "read-state", "--report", "--statement-timeout", "500us")
		require.Contains(t, res.Stderr, "--statement-timeout: must be at least 1ms")
	})

	t.Run("DatabaseUnreachable", func(t *testing.T) {
		t.Parallel()
		env := baseEnv()
		env["DATABASE_URL"] = "postgres://buzz@127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0]) + "/buzz?sslmode=disable"
		res := runBinary(t, env, "maintenance", "read-state", "--report")
		require.Equal(t, 2, res.Code)
		require.Regexp(t, regexp.MustCompile(`^buzz-relay maintenance read-state: connect to postgres: `), res.Stderr)
		require.Empty(t, res.Stdout)
	})
}

// requireAligned checks that every column of row starts where the
// header's column of the same index starts.
func requireAligned(t *testing.T, header, row string) {
	t.Helper()
	starts := func(s string) []int {
		var out []int
		for _, m := range regexp.MustCompile(`\S+`).FindAllStringIndex(s, -1) {
			out = append(out, m[0])
		}
		return out
	}
	require.Equal(t, starts(header), starts(row), "columns of %q under %q", row, header)
}
