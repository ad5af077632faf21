package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// cliBundle is an operator's environment on a migrated database of its own.
type cliBundle struct {
	env map[string]string
}

func setupCLI(t *testing.T) *cliBundle {
	t.Helper()
	_, url := dbtest.NewDB(t)
	env := baseEnv()
	env["DATABASE_URL"] = url
	return &cliBundle{env: env}
}

func (b *cliBundle) run(t *testing.T, args ...string) result {
	t.Helper()
	return runBinary(t, b.env, args...)
}

// mustRun runs a command that must succeed.
func (b *cliBundle) mustRun(t *testing.T, args ...string) result {
	t.Helper()
	res := b.run(t, args...)
	require.Equal(t, 0, res.Code, "buzz-relay %v\nstdout:\n%s\nstderr:\n%s", args, res.Stdout, res.Stderr)
	return res
}

// The output of docs/PROTOCOL.md §2.4.
func TestCommunityCommand(t *testing.T) {
	t.Parallel()

	t.Run("AddTwiceFails", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		res := b.mustRun(t, "community", "add", "--host", "a.test")
		require.Regexp(t, `^\{"community_id":"[0-9a-f-]{36}","host":"a\.test"\}\n$`, res.Stdout)
		id := res.lines(t)[0]["community_id"].(string)
		require.Regexp(t, uuidRE, id)
		require.Empty(t, res.Stderr)

		again := b.run(t, "community", "add", "--host", "a.test")
		require.Equal(t, 2, again.Code)
		require.Contains(t, again.Stderr, "host already configured")
		require.Empty(t, again.Stdout)

		// Another spelling of the same host is the same host.
		spelled := b.run(t, "community", "add", "--host", " A.TEST. ")
		require.Equal(t, 2, spelled.Code)
		require.Contains(t, spelled.Stderr, "host already configured")
	})

	t.Run("ListShowsHostAndAliases", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		added := b.mustRun(t, "community", "add", "--host", "b.test:8443").lines(t)[0]
		alias := b.mustRun(t, "community", "add-host", "--host", "alias.b.test", "--to", "b.test:8443").lines(t)[0]
		require.Equal(t, map[string]any{"community_id": added["community_id"], "alias": "alias.b.test"}, alias)

		list := b.mustRun(t, "community", "list").lines(t)
		require.Len(t, list, 1)
		require.Equal(t, added["community_id"], list[0]["community_id"])
		require.Equal(t, "b.test:8443", list[0]["host"])
		require.Equal(t, []any{"alias.b.test"}, list[0]["aliases"])
		_, err := time.Parse(time.RFC3339Nano, list[0]["created_at"].(string))
		require.NoError(t, err)
	})

	t.Run("AddWithOwner", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		owner := eventtest.NewKey()
		added := b.mustRun(t, "community", "add", "--host", "o.test", "--owner", owner.PubKey).lines(t)[0]
		require.Equal(t, "o.test", added["host"])
		list := b.mustRun(t, "member", "list", "--host", "o.test").lines(t)
		require.Len(t, list, 1)
		require.Equal(t, owner.PubKey, list[0]["pubkey"])
		require.Equal(t, "owner", list[0]["role"])
	})

	t.Run("ListWithoutAliases", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		b.mustRun(t, "community", "add", "--host", "c.test")
		list := b.mustRun(t, "community", "list").lines(t)
		require.Len(t, list, 1)
		require.Equal(t, []any{}, list[0]["aliases"])
	})

	t.Run("UsageErrors", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		for _, args := range [][]string{
			{"community"}, {"community", "rename"}, {"community", "add"}, {"community", "add", "--bogus"},
			{"member", "list"}, {"member", "add", "--host", "x.test", "--pubkey", strings.Repeat("a", 64), "--role", "boss"},
			{"no-such-command"},
		} {
			res := b.run(t, args...)
			require.Equal(t, 2, res.Code, "buzz-relay %v", args)
			require.NotEmpty(t, res.Stderr, "buzz-relay %v", args)
			require.Empty(t, res.Stdout, "buzz-relay %v", args)
		}
	})

	t.Run("AddHostToUnknownHostFails", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		res := b.run(t, "community", "add-host", "--host", "alias.test", "--to", "nowhere.test")
		require.Equal(t, 2, res.Code)
		require.Contains(t, res.Stderr, "no community is configured for host nowhere.test")
	})
}

// docs/PROTOCOL.md §2.4: member add / remove / list, and invalid pubkeys.
func TestMemberCommand(t *testing.T) {
	t.Parallel()

	t.Run("AddListRemove", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		cid := b.mustRun(t, "community", "add", "--host", "m.test").lines(t)[0]["community_id"]
		alice, bob := eventtest.NewKey(), eventtest.NewKey()

		// Upper-case hex is stored lowercase; the default role is member.
		added := b.mustRun(t, "member", "add", "--host", "m.test", "--pubkey", strings.ToUpper(alice.PubKey))
		require.Equal(t, `{"community_id":"`+cid.(string)+`","pubkey":"`+alice.PubKey+`","role":"member"}`+"\n", added.Stdout)
		// An upsert changes the role.
		added = b.mustRun(t, "member", "add", "--host", "m.test", "--pubkey", alice.PubKey, "--role", "admin")
		require.Equal(t, map[string]any{"community_id": cid, "pubkey": alice.PubKey, "role": "admin"}, added.lines(t)[0])
		b.mustRun(t, "member", "add", "--host", "m.test", "--pubkey", bob.PubKey, "--role", "owner")

		list := b.mustRun(t, "member", "list", "--host", "M.TEST").lines(t)
		require.Len(t, list, 2)
		roles := map[string]string{}
		for _, m := range list {
			require.Equal(t, "cli", m["added_by"])
			_, err := time.Parse(time.RFC3339Nano, m["created_at"].(string))
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"pubkey", "role", "added_by", "created_at"}, keys(m))
			roles[m["pubkey"].(string)] = m["role"].(string)
		}
		require.Equal(t, map[string]string{alice.PubKey: "admin", bob.PubKey: "owner"}, roles)

		require.Equal(t, `{"removed":true}`+"\n", b.mustRun(t, "member", "remove", "--host", "m.test", "--pubkey", alice.PubKey).Stdout)
		require.Equal(t, `{"removed":false}`+"\n", b.mustRun(t, "member", "remove", "--host", "m.test", "--pubkey", alice.PubKey).Stdout)
		list = b.mustRun(t, "member", "list", "--host", "m.test").lines(t)
		require.Len(t, list, 1)
		require.Equal(t, bob.PubKey, list[0]["pubkey"])

		// Each change (not the no-op second remove) is an audit intent of
		// relay scope with no actor, written with the membership row.
		pool, err := pgxpool.New(context.Background(), b.env["DATABASE_URL"])
		require.NoError(t, err)
		defer pool.Close()
		rows, err := pool.Query(context.Background(), `SELECT action, object_id, actor_pubkey IS NULL, detail::text
			FROM audit_outbox WHERE community_id = $1 ORDER BY id`, cid)
		require.NoError(t, err)
		type intent struct {
			Action, Object string
			NoActor        bool
			Detail         string
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[intent])
		require.NoError(t, err)
		require.Equal(t, []intent{
			{"member_added", alice.PubKey, true, `{"role": "member", "scope": "relay", "event_id": null, "channel_id": null, "previous_role": null}`},
			{"member_added", alice.PubKey, true, `{"role": "admin", "scope": "relay", "event_id": null, "channel_id": null, "previous_role": "member"}`},
			{"member_added", bob.PubKey, true, `{"role": "owner", "scope": "relay", "event_id": null, "channel_id": null, "previous_role": null}`},
			{"member_removed", alice.PubKey, true, `{"scope": "relay", "reason": "removed", "event_id": null, "channel_id": null}`},
		}, got)
	})

	t.Run("InvalidPubkey", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		b.mustRun(t, "community", "add", "--host", "m.test")
		for _, pk := range []string{"", "abc", strings.Repeat("g", 64), strings.Repeat("a", 63), strings.Repeat("a", 65),
			"npub1" + strings.Repeat("q", 58)} {
			for _, sub := range []string{"add", "remove"} {
				res := b.run(t, "member", sub, "--host", "m.test", "--pubkey", pk)
				require.Equal(t, 2, res.Code, "member %s --pubkey %q", sub, pk)
				require.Equal(t, "invalid pubkey\n", res.Stderr, "member %s --pubkey %q", sub, pk)
				require.Empty(t, res.Stdout)
			}
		}
		res := b.run(t, "community", "add", "--host", "o.test", "--owner", "xyz")
		require.Equal(t, 2, res.Code)
		require.Equal(t, "invalid pubkey\n", res.Stderr)
	})

	t.Run("UnknownHost", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		res := b.run(t, "member", "list", "--host", "nowhere.test")
		require.Equal(t, 2, res.Code)
		require.Contains(t, res.Stderr, "no community is configured for host nowhere.test")
	})
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ledgerRow is one row of buzz_schema_migrations.
type ledgerRow struct {
	Version   int
	Name      string
	Checksum  string
	AppliedAt time.Time
}

// readLedger reads the migration ledger on a short connection.
func readLedger(t *testing.T, url string) []ledgerRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT version, name, checksum, applied_at FROM buzz_schema_migrations ORDER BY version")
	require.NoError(t, err)
	ledger, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ledgerRow])
	require.NoError(t, err)
	return ledger
}

// Checks 21 and 24 on an empty database.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) (*cliBundle, string) {
		t.Helper()
		url := dbtest.NewEmptyDB(t)
		env := baseEnv()
		env["DATABASE_URL"] = url
		return &cliBundle{env: env}, url
	}

	t.Run("ServeRefusesPendingMigrations", func(t *testing.T) {
		t.Parallel()
		_, url := setup(t)
		env := relayEnv(t)
		env["DATABASE_URL"] = url
		env["BUZZ_AUTO_MIGRATE"] = "false"
		p := startRelay(t, env)
		require.NotEqual(t, 0, p.wait(time.Minute))

		var msg string
		for _, rec := range p.logRecords() {
			if e, ok := rec["err"].(string); ok && strings.Contains(e, "pending migrations") {
				msg = e
			}
		}
		require.NotEmpty(t, msg, "no log record names the pending migrations:\n%s\n%s", p.Stdout, p.Stderr)
		for _, m := range pg.Migrations() {
			require.Contains(t, msg, m.Name)
		}
		require.Contains(t, msg, `run "buzz-relay migrate"`)
		require.Contains(t, msg, "BUZZ_AUTO_MIGRATE=true")

		code, _, err := httpGet("http://" + env["BUZZ_BIND_ADDR"] + "/health")
		require.Error(t, err, "the app port answered %d", code)
	})

	t.Run("MigrateAppliesEveryFileOnce", func(t *testing.T) {
		t.Parallel()
		b, url := setup(t)
		files := pg.Migrations()
		require.NotEmpty(t, files)

		pending := b.mustRun(t, "migrate", "--status").lines(t)
		require.Len(t, pending, len(files))
		for i, line := range pending {
			require.Equal(t, map[string]any{"version": float64(files[i].Version), "name": files[i].Name, "applied_at": nil}, line)
		}

		b.mustRun(t, "migrate")
		status := b.mustRun(t, "migrate", "--status").lines(t)
		require.Len(t, status, len(files))
		for i, line := range status {
			require.Equal(t, float64(files[i].Version), line["version"])
			require.Equal(t, files[i].Name, line["name"])
			at, ok := line["applied_at"].(string)
			require.True(t, ok, "%s not applied: %v", files[i].Name, line)
			_, err := time.Parse(time.RFC3339Nano, at)
			require.NoError(t, err)
		}
		ledger := readLedger(t, url)
		require.Len(t, ledger, len(files))
		for i, row := range ledger {
			require.Equal(t, files[i].Version, row.Version)
			require.Equal(t, files[i].Checksum, row.Checksum)
		}

		res := b.mustRun(t, "migrate")
		require.Equal(t, `{"applied":[],"status":"up to date"}`+"\n", res.Stdout)
		require.Equal(t, ledger, readLedger(t, url), "a second migrate changed the ledger")
		require.Equal(t, status, b.mustRun(t, "migrate", "--status").lines(t))
	})
}

// Issue 10: migrate says what it did, as one JSON line.
func TestMigrateReports(t *testing.T) {
	t.Parallel()
	env := baseEnv()
	env["DATABASE_URL"] = dbtest.NewEmptyDB(t)

	first := runBinary(t, env, "migrate")
	require.Equal(t, 0, first.Code, first.Stderr)
	names := make([]string, 0, len(pg.Migrations()))
	for _, m := range pg.Migrations() {
		names = append(names, m.Name)
	}
	want, err := json.Marshal(map[string]any{"applied": names, "status": "applied"})
	require.NoError(t, err)
	require.Equal(t, string(want)+"\n", first.Stdout)
	require.Contains(t, first.Stdout, `"applied":["0001_`)
	require.Empty(t, first.Stderr)

	second := runBinary(t, env, "migrate")
	require.Equal(t, 0, second.Code, second.Stderr)
	require.Equal(t, `{"applied":[],"status":"up to date"}`+"\n", second.Stdout)
	require.Empty(t, second.Stderr)
}
