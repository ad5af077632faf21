package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// olBundle is a migrated database holding registrations and outbox rows of
// two configured listeners (A, B) and two unconfigured ones (C, D), and the
// environment of an operator who configured A and B.
type olBundle struct {
	*cliBundle
	pool       *pgxpool.Pool
	a, b, c, d string
}

// olCommand is the command under test.
var olCommand = []string{"maintenance", "operator-listeners"}

func olArgs(args ...string) []string { return append(append([]string{}, olCommand...), args...) }

func setupOperatorListeners(t *testing.T) *olBundle {
	t.Helper()
	ctx := context.Background()
	b := &olBundle{cliBundle: setupCLI(t)}
	var err error
	b.pool, err = pgxpool.New(ctx, b.env["DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(b.pool.Close)
	b.a, b.b, b.c, b.d = eventtest.NewKey().PubKey, eventtest.NewKey().PubKey, eventtest.NewKey().PubKey, eventtest.NewKey().PubKey
	b.env["BUZZ_OPERATOR_LISTENERS"] = " " + strings.ToUpper(b.a) + ":https://A.example/hook ; " + b.b + ":https://b.example:8443/x ;"
	b.env["RELAY_OPERATOR_API_ORIGIN"] = "https://relay.example"
	community := b.mustRun(t, "community", "add", "--host", "ol.test").lines(t)[0]["community_id"].(string)

	// A: two registrations, the older one hour old; one pending row one
	// minute old and one sending row past the 15-minute eligibility.
	b.register(t, b.a, "1 hour", "1 minute")
	b.queue(t, b.a, community, "pending", "1 minute")
	b.queue(t, b.a, community, "sending", "20 minutes")
	// B: configured, nothing stored.
	// C: retired from the configuration, three registrations still
	// queueing rows, one of them past eligibility.
	b.register(t, b.c, "2 days", "3 hours", "10 seconds")
	b.queue(t, b.c, community, "pending", "16 minutes")
	b.queue(t, b.c, community, "pending", "30 seconds")
	// D: unconfigured, an outbox row left and no registration.
	b.queue(t, b.d, community, "sending", "2 minutes")
	return b
}

// register adds one registration of listener per age (an interval).
func (b *olBundle) register(t *testing.T, listener string, ages ...string) {
	t.Helper()
	for _, age := range ages {
		_, err := b.pool.Exec(context.Background(), `INSERT INTO operator_listener_pubkeys (listener_pubkey, target_pubkey, created_at)
			VALUES ($1, $2, now() - $3::interval)`, mustUnhex(t, listener), randomBytes(32), age)
		require.NoError(t, err)
	}
}

// queue adds one outbox row of listener in state, created age ago.
func (b *olBundle) queue(t *testing.T, listener, community, state, age string) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `INSERT INTO operator_listener_outbox
		(listener_pubkey, target_pubkey, community_id, event_id, event_kind, event_created_at, state, attempts,
		 lease_until, claim_id, created_at)
		VALUES ($1, $2, $3, $4, 9, now(), $5, CASE WHEN $5 = 'sending' THEN 1 ELSE 0 END,
		 CASE WHEN $5 = 'sending' THEN now() + interval '30 seconds' END,
		 CASE WHEN $5 = 'sending' THEN gen_random_uuid() END, now() - $6::interval)`,
		mustUnhex(t, listener), randomBytes(32), community, randomBytes(32), state, age)
	require.NoError(t, err)
}

// stored is how many registrations and outbox rows listener has.
func (b *olBundle) stored(t *testing.T, listener string) [2]int {
	t.Helper()
	var n [2]int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM operator_listener_pubkeys WHERE listener_pubkey = $1),
		(SELECT count(*) FROM operator_listener_outbox WHERE listener_pubkey = $1)`, mustUnhex(t, listener)).Scan(&n[0], &n[1]))
	return n
}

func mustUnhex(t *testing.T, s string) []byte {
	t.Helper()
	raw, err := hex.DecodeString(s)
	require.NoError(t, err)
	return raw
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// requireAge checks that line[key] is a whole number of seconds in
// [atLeast, atLeast+60) (the rows were written moments before the command
// ran) and removes it from line.
func requireAge(t *testing.T, line map[string]any, key string, atLeast float64) {
	t.Helper()
	v, ok := line[key].(float64)
	require.True(t, ok, "%s = %v is a number", key, line[key])
	require.Equal(t, float64(int64(v)), v, "%s is whole seconds", key)
	require.GreaterOrEqual(t, v, atLeast, key)
	require.Less(t, v, atLeast+60, key)
	delete(line, key)
}

// maintenance operator-listeners (docs/PROTOCOL.md §15.10).
func TestOperatorListenersCommand(t *testing.T) {
	t.Parallel()

	t.Run("Report", func(t *testing.T) {
		t.Parallel()
		b := setupOperatorListeners(t)
		before := [4][2]int{b.stored(t, b.a), b.stored(t, b.b), b.stored(t, b.c), b.stored(t, b.d)}
		res := b.mustRun(t, olArgs("--report")...)
		require.Empty(t, res.Stderr)
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			require.Regexp(t, `^\{"listener":"[0-9a-f]{64}","configured":(true|false),"url_host":("[^"]+"|null),"registrations":\d+,`+
				`"oldest_registration_age_s":(\d+|null),"outbox_pending":\d+,"outbox_sending":\d+,"oldest_outbox_age_s":(\d+|null),`+
				`"outbox_past_eligibility":\d+\}$`, line, "keys in the order of docs/PROTOCOL.md §15.10")
		}
		lines := res.lines(t)
		got := map[string]map[string]any{}
		var order []string
		for _, l := range lines {
			order = append(order, l["listener"].(string))
			got[l["listener"].(string)] = l
		}
		want := []string{b.a, b.b, b.c, b.d}
		sort.Strings(want)
		require.Equal(t, want, order, "one line per listener of the configuration or of either table, by pubkey")

		requireAge(t, got[b.a], "oldest_registration_age_s", 3600)
		requireAge(t, got[b.a], "oldest_outbox_age_s", 20*60)
		require.Equal(t, map[string]any{"listener": b.a, "configured": true, "url_host": "a.example", "registrations": 2.0,
			"outbox_pending": 1.0, "outbox_sending": 1.0, "outbox_past_eligibility": 1.0}, got[b.a])

		require.Equal(t, map[string]any{"listener": b.b, "configured": true, "url_host": "b.example:8443", "registrations": 0.0,
			"oldest_registration_age_s": nil, "outbox_pending": 0.0, "outbox_sending": 0.0, "oldest_outbox_age_s": nil,
			"outbox_past_eligibility": 0.0}, got[b.b], "configured with nothing stored")

		requireAge(t, got[b.c], "oldest_registration_age_s", 2*86400)
		requireAge(t, got[b.c], "oldest_outbox_age_s", 16*60)
		require.Equal(t, map[string]any{"listener": b.c, "configured": false, "url_host": nil, "registrations": 3.0,
			"outbox_pending": 2.0, "outbox_sending": 0.0, "outbox_past_eligibility": 1.0}, got[b.c])

		requireAge(t, got[b.d], "oldest_outbox_age_s", 2*60)
		require.Equal(t, map[string]any{"listener": b.d, "configured": false, "url_host": nil, "registrations": 0.0,
			"oldest_registration_age_s": nil, "outbox_pending": 0.0, "outbox_sending": 1.0, "outbox_past_eligibility": 0.0}, got[b.d])

		require.Equal(t, before, [4][2]int{b.stored(t, b.a), b.stored(t, b.b), b.stored(t, b.c), b.stored(t, b.d)}, "read-only")
	})

	t.Run("ReportWithoutListenersConfigured", func(t *testing.T) {
		t.Parallel()
		b := setupOperatorListeners(t)
		delete(b.env, "BUZZ_OPERATOR_LISTENERS")
		lines := b.mustRun(t, olArgs("--report")...).lines(t)
		require.Len(t, lines, 3, "A, C and D have rows; B is neither configured nor stored")
		for _, l := range lines {
			require.NotEqual(t, b.b, l["listener"])
			require.Equal(t, false, l["configured"])
			require.Nil(t, l["url_host"])
		}
	})

	t.Run("ReportEmpty", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		res := b.mustRun(t, olArgs("--report")...)
		require.Empty(t, res.Stdout)
		require.Empty(t, res.Stderr)
	})

	t.Run("ForgetDryRun", func(t *testing.T) {
		t.Parallel()
		b := setupOperatorListeners(t)
		res := b.mustRun(t, olArgs("--forget", b.c)...)
		require.Equal(t, `{"listener":"`+b.c+`","registrations_deleted":3,"outbox_deleted":2,"dry_run":true}`+"\n", res.Stdout)
		require.Empty(t, res.Stderr)
		require.Equal(t, [2]int{3, 2}, b.stored(t, b.c), "nothing deleted without --yes")
		require.Equal(t, [2]int{2, 2}, b.stored(t, b.a))
	})

	t.Run("ForgetYes", func(t *testing.T) {
		t.Parallel()
		b := setupOperatorListeners(t)
		res := b.mustRun(t, olArgs("--forget", strings.ToUpper(b.c), "--yes")...)
		require.Equal(t, `{"listener":"`+b.c+`","registrations_deleted":3,"outbox_deleted":2,"dry_run":false}`+"\n", res.Stdout)
		require.Empty(t, res.Stderr)
		require.Equal(t, [2]int{0, 0}, b.stored(t, b.c), "C's registrations and rows are gone")
		require.Equal(t, [2]int{2, 2}, b.stored(t, b.a), "other listeners are untouched")
		require.Equal(t, [2]int{0, 1}, b.stored(t, b.d))

		var listed []string
		for _, l := range b.mustRun(t, olArgs("--report")...).lines(t) {
			listed = append(listed, l["listener"].(string))
		}
		require.ElementsMatch(t, []string{b.a, b.b, b.d}, listed, "C is no longer reported")

		again := b.mustRun(t, olArgs("--forget", b.c, "--yes")...)
		require.Equal(t, `{"listener":"`+b.c+`","registrations_deleted":0,"outbox_deleted":0,"dry_run":false}`+"\n", again.Stdout)
	})

	t.Run("ForgetConfiguredWarns", func(t *testing.T) {
		t.Parallel()
		b := setupOperatorListeners(t)
		res := b.mustRun(t, olArgs("--forget", b.a, "--yes")...)
		require.Equal(t, `{"listener":"`+b.a+`","registrations_deleted":2,"outbox_deleted":2,"dry_run":false}`+"\n", res.Stdout)
		require.Equal(t, "buzz-relay maintenance operator-listeners: warning: listener "+b.a+
			" is still in BUZZ_OPERATOR_LISTENERS: it can register again; remove it on every process\n", res.Stderr)
		require.Equal(t, [2]int{0, 0}, b.stored(t, b.a))
	})

	t.Run("UsageErrors", func(t *testing.T) {
		t.Parallel()
		b := setupOperatorListeners(t)
		for _, args := range [][]string{
			{},
			{"--yes"},
			{"--report", "--yes"},
			{"--report", "--forget", b.c},
			{"--report", "--forget", b.c, "--yes"},
			{"--forget", "xyz", "--yes"},
			{"--forget", "", "--yes"},
			{"--forget", b.c[:63], "--yes"},
			{"--forget", b.c + "0", "--yes"},
			{"--forget", strings.Repeat("g", 64), "--yes"},
			{"--forget"},
			{"--report", "extra"},
			{"--report", "--bogus"},
		} {
			res := b.run(t, olArgs(args...)...)
			require.Equal(t, 2, res.Code, "buzz-relay %v", olArgs(args...))
			require.Contains(t, res.Stderr, "buzz-relay maintenance operator-listeners: ", "buzz-relay %v", olArgs(args...))
			require.Contains(t, res.Stderr, "(see: buzz-relay maintenance operator-listeners --help)", "buzz-relay %v", olArgs(args...))
			require.Empty(t, res.Stdout, "buzz-relay %v", olArgs(args...))
		}
		require.Equal(t, [2]int{3, 2}, b.stored(t, b.c), "no usage error deleted anything")
		require.Contains(t, b.run(t, olArgs()...).Stderr, "give either --report or --forget HEX [--yes]")
		require.Contains(t, b.run(t, olArgs("--yes")...).Stderr, "give either --report or --forget HEX [--yes]")
		require.Contains(t, b.run(t, olArgs("--report", "--yes")...).Stderr, "--yes goes with --forget HEX")
		require.Contains(t, b.run(t, olArgs("--forget", "xyz")...).Stderr, "--forget: invalid pubkey")
	})

	t.Run("BadConfiguration", func(t *testing.T) {
		t.Parallel()
		b := setupOperatorListeners(t)
		b.env["BUZZ_OPERATOR_LISTENERS"] = b.c + ":http://c.example/"
		for _, args := range [][]string{{"--report"}, {"--forget", b.c, "--yes"}} {
			res := b.run(t, olArgs(args...)...)
			require.Equal(t, 2, res.Code)
			require.Equal(t, "buzz-relay maintenance operator-listeners: invalid BUZZ_OPERATOR_LISTENERS: "+
				"endpoints must be HTTPS URLs without credentials, query, or fragment\n", res.Stderr)
			require.Empty(t, res.Stdout)
		}
		require.Equal(t, [2]int{3, 2}, b.stored(t, b.c))
	})

	t.Run("DatabaseUnreachable", func(t *testing.T) {
		t.Parallel()
		env := baseEnv()
		env["DATABASE_URL"] = "postgres://buzz@127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0]) + "/buzz?sslmode=disable"
		for _, args := range [][]string{{"--report"}, {"--forget", eventtest.NewKey().PubKey}} {
			res := runBinary(t, env, olArgs(args...)...)
			require.Equal(t, 2, res.Code)
			require.Regexp(t, regexp.MustCompile(`^buzz-relay maintenance operator-listeners: connect to postgres: `), res.Stderr)
			require.Empty(t, res.Stdout)
		}
	})
}
