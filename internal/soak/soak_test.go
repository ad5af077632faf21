package soak

// The soak's tests run it for real, in-process: the buzz-relay binary that
// TestMain builds, a PostgreSQL cluster of the soak's own, redis-server
// from PATH, an HTTPS listener endpoint, all on loopback. Each fault
// scenario is one deployment; a scenario passes only when nothing
// acknowledged was lost, every check passed and the relays came back by
// themselves.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/buzz-relay/buzz/internal/abuse"
)

// parseConfig parses args as "buzz-bench soak" does.
func parseConfig(args []string, stderr io.Writer) (Config, error) {
	fs := pflag.NewFlagSet("soak", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	done := Flags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return done()
}

// relayBin is the buzz-relay TestMain built.
var relayBin string

func TestMain(m *testing.M) {
	// The storm fault starts this binary as "buzz-bench soak storm".
	if len(os.Args) > len(stormArgs) && slices.Equal(os.Args[1:1+len(stormArgs)], stormArgs) {
		os.Exit(RunStorm(context.Background(), os.Args[1+len(stormArgs):], os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "buzz-soak-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "build dir:", err)
		os.Exit(1)
	}
	relayBin = filepath.Join(dir, "buzz-relay")
	build := exec.Command("go", "build", "-o", relayBin, "../../cmd/buzz-relay")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "build buzz-relay:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testPace spaces each connection's operations in the test-sized runs: the
// nine runs of this package go on four at a time beside the rest of the
// test command, and unpaced each would take all the CPU it can get for
// operations no check needs (docs/PERFORMANCE.md, "Test suite time").
const testPace = 200 * time.Millisecond

// smallArgs is a test-sized run: 6 connections, paced, one relay unless
// extra says otherwise.
func smallArgs(duration time.Duration, extra ...string) []string {
	return append([]string{"--relay-bin", relayBin, "--conns", "6", "--duration", duration.String(),
		"--pace", testPace.String(), "--settle", "60s", "--op-timeout", "20s"}, extra...)
}

// soakOf runs the soak with args as the command does and returns its
// summary; progress goes to the test log.
func soakOf(t *testing.T, args ...string) *summary {
	t.Helper()
	cfg, err := parseConfig(args, io.Discard)
	require.NoError(t, err)
	var progress bytes.Buffer
	sum, err := soak(t.Context(), cfg, &progress)
	require.NoError(t, err, "progress:\n%s", progress.String())
	t.Logf("progress:\n%s", progress.String())
	var out bytes.Buffer
	writeLine(&out, sum)
	t.Logf("summary: %s", out.String())
	return sum
}

// requireSound is the bar of every run: nothing lost, every check passed,
// every relay back by itself, and every operation type exercised with at
// least one success.
func requireSound(t *testing.T, sum *summary) {
	t.Helper()
	require.Zero(t, sum.Lost, "lost: %v", sum.Checks.FirstLost)
	require.True(t, sum.Checks.ok(), "checks: %+v", sum.Checks)
	for _, f := range sum.Faults {
		require.Empty(t, f.Error, "fault %s", f.Name)
		require.True(t, f.Recovered, "fault %s: recovered", f.Name)
	}
	require.True(t, sum.Passed())
	for _, m := range mix {
		o := sum.Ops[m.op]
		require.Greater(t, o.Count-o.Failed, 0, "operation %s succeeded at least once: %+v", m.op, o)
	}
	require.Greater(t, sum.Checks.Acked, 100, "the run acknowledged writes")
	require.Greater(t, sum.Checks.Mentions, 0, "the run mentioned listener targets")
	require.Greater(t, sum.Checks.ReadStateCoords, 0, "the run wrote read state")
	require.Zero(t, sum.Errors["hang"], "no operation hung: %v", sum.ErrorSample["hang"])
}

// The soak at the test command's size, with no fault: every operation
// type runs against three communities and the ledger matches the database.
func TestSoak(t *testing.T) {
	t.Parallel()
	sum := soakOf(t, smallArgs(15*time.Second)...)
	requireSound(t, sum)
	require.Empty(t, sum.Errors, "no failures without a fault: %v", sum.ErrorSample)
	require.Equal(t, 3, sum.Communities)
	require.Positive(t, sum.RSS.PeakMB)
	// Paced: each connection starts at most one operation per pace, plus
	// its one connect.
	require.LessOrEqual(t, sum.Operations, 6*(int(15*time.Second/testPace)+1)+6, "the pace held")
	require.Equal(t, float64(testPace.Milliseconds()), sum.PaceMS)
}

// Each fault, injected into its own test-sized soak. Every one must lose
// nothing acknowledged and end with every relay ready by itself; each
// also checks what a client and the operator saw during it.
func TestSoakFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fault string
		extra []string
		saw   func(t *testing.T, sum *summary, f faultReport)
	}{
		{"kill-relay", nil, func(t *testing.T, sum *summary, f faultReport) {
			// The killed relay's clients saw their connections drop and
			// dialled again.
			require.Greater(t, sum.Ops["connect"].Count, 6)
		}},
		{"pg-fast", nil, pgOutage},
		{"pg-immediate", nil, pgOutage},
		{"failover", nil, func(t *testing.T, sum *summary, f faultReport) {
			require.Equal(t, true, f.Observed["readiness_503_without_writer"], "readiness 503 while no writer answered: %v", f.Observed)
			require.Equal(t, "a", f.Observed["primary_killed"])
			require.Equal(t, "b", f.Observed["primary"], "the standby is the primary")
			noWriter, ok := f.Observed["no_writer_s"].(float64)
			require.True(t, ok, "time without a writer recorded: %v", f.Observed)
			// Kill, 503, promotion and the first OK true: seconds on a
			// quiet machine; generous for a busy one.
			require.Positive(t, noWriter)
			require.Less(t, noWriter, 60.0)
			require.GreaterOrEqual(t, noWriter, f.Observed["promotion_began_after_s"].(float64), "the first write after the promotion began")
			require.Positive(t, f.Observed["readiness_200_after_s"], "every relay ready again")
			require.Positive(t, f.Observed["ops_without_writer"], "operations were under way without a writer")
			for prefix, n := range f.Observed["failed_without_writer"].(map[string]int) {
				require.Contains(t, []string{"error:", "NIP-98:", "relay:", "HTTP 500", "transport:"}, prefix,
					"a failure of a known kind (%d): %v", n, sum.ErrorSample[prefix])
			}
			require.Positive(t, f.Observed["standby_rebuilt_s"], "a new standby was cloned")
		}},
		{"redis", []string{"--relays", "2"}, func(t *testing.T, sum *summary, f faultReport) {
			require.Equal(t, true, f.Observed["status_redis_disconnected"], "/_status showed Redis down")
		}},
		{"listener", []string{"--listener-down", "10s"}, func(t *testing.T, sum *summary, f faultReport) {
			require.Positive(t, f.Observed["notifications_failed"], "the endpoint failed notifications")
			require.Positive(t, sum.Checks.MentionsDelivered)
		}},
		{"slow-client", nil, func(t *testing.T, sum *summary, f faultReport) {
			require.Equal(t, true, f.Observed["disconnected_by_relay"])
			require.Equal(t, 1008, f.Observed["close_status"], "closed as a policy violation: %v", f.Observed)
			// Bounded: the queue is capped, so buffering for a reader that
			// never reads costs the relay little (a generous bound).
			require.Less(t, f.Observed["rss_peak_mb"].(float64)-f.Observed["rss_before_mb"].(float64), 256.0)
		}},
		{"storm", []string{"--storm-conns", "1000", "--storm-time", "60s"}, func(t *testing.T, sum *summary, f faultReport) {
			require.EqualValues(t, 1000, f.Observed["connections"])
			require.EqualValues(t, 0, f.Observed["other"])
			// The soak's relays run with BUZZ_WS_CONNECT_RATE=20 (bursts of
			// 80): the storm's address is refused 429 past that, the forged
			// AUTHs the relay did accept connections for are refused.
			require.Positive(t, f.Observed["rate_limited_429"])
			require.Positive(t, f.Observed["auth_refused"])
			// The CPU figures are read (a relay under load uses some).
			require.Positive(t, f.Observed["relay_cpu_cores_during"])
			require.Positive(t, f.Observed["storm_cpu_cores"])
			require.NotEmpty(t, f.HonestP99ms, "honest clients worked during the storm")
			require.Empty(t, f.HonestFailed, "no honest operation failed during the storm")
		}},
		{"abuse", []string{"--abuse-time", "18s", "--abuse-scale", "0.02"}, func(t *testing.T, sum *summary, f faultReport) {
			// Every attack ran and its answers were counted by prefix;
			// the honest load went on beside it, before and during.
			require.Positive(t, f.Observed["seeded"], f.Observed)
			per := f.Observed["attacks"].(map[string]map[string]int)
			for _, name := range abuse.Names() {
				require.NotEmpty(t, per[name], "attack %s: %v", name, f.Observed)
			}
			require.NotEmpty(t, f.Observed["attacker"], f.Observed)
			require.NotEmpty(t, f.HonestP99ms, "honest clients worked during the attacks")
			require.NotEmpty(t, f.BeforeP99ms, "and before them")
		}},
	}
	for _, c := range cases {
		t.Run(c.fault, func(t *testing.T) {
			t.Parallel()
			args := append(smallArgs(30*time.Second, "--faults", c.fault, "--pg-down", "10s"), c.extra...)
			sum := soakOf(t, args...)
			requireSound(t, sum)
			require.Len(t, sum.Faults, 1)
			c.saw(t, sum, sum.Faults[0])
		})
	}
}

// pgOutage: readiness went 503 while PostgreSQL was down, and the clients
// got prefixed answers (error:, or the bridge's fail-closed NIP-98 and
// unknown-host answers), never a hang.
func pgOutage(t *testing.T, sum *summary, f faultReport) {
	require.Equal(t, true, f.Observed["readiness_503_while_down"])
	require.Positive(t, sum.Errors["error:"], "clients were told the relay failed: %v", sum.ErrorSample)
	for prefix := range sum.Errors {
		require.Contains(t, []string{"error:", "NIP-98:", "relay:", "HTTP 500", "transport:"}, prefix,
			"an outage answer of a known kind: %v", sum.ErrorSample[prefix])
	}
}

// The checks can fail: after a clean run, each kind of loss made by hand
// in the database (or at the endpoint) is found and counted.
func TestCheckFindsLoss(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig(smallArgs(8*time.Second), io.Discard)
	require.NoError(t, err)
	ctx := t.Context()
	s, err := setUp(ctx, cfg, io.Discard)
	if s != nil {
		t.Cleanup(func() { s.tearDown(io.Discard) })
	}
	require.NoError(t, err)
	s.drive(ctx, io.Discard)
	pool, err := pgxpool.New(ctx, s.db.URL())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	verify := func(host string) (int, error) {
		_, code, err := runRelayCommand(ctx, relayBin, s.relays[0].env, "audit", "verify", "--community", host)
		return code, err
	}
	check := func() *checkReport {
		rep, err := checkLedger(ctx, pool, s.load.ledger.all(), s.comms, s.endpoint, 30*time.Second, verify)
		require.NoError(t, err)
		return rep
	}
	clean := check()
	require.True(t, clean.ok(), "%+v", clean)

	// The mention whose audit entry goes is one with a later entry in its
	// chain: a chain cut short at its tail still verifies, a chain with a
	// hole does not.
	acks := s.load.ledger.all()
	var msg, mention, readState ack
	for _, a := range acks {
		switch {
		case a.Duplicate:
		case a.D != "":
			readState = a
		case len(a.Mentions) > 0:
			if mention.ID == "" && hasLaterAuditEntry(t, pool, a.ID) {
				mention = a
			}
		default:
			msg = a
		}
	}
	require.NotEmpty(t, msg.ID)
	require.NotEmpty(t, mention.ID)
	require.NotEmpty(t, readState.ID)

	// An acknowledged message's row gone.
	_, err = pool.Exec(ctx, `DELETE FROM events WHERE id = decode($1, 'hex')`, msg.ID)
	require.NoError(t, err)
	rep := check()
	require.Equal(t, 1, rep.EventsMissing)
	require.Equal(t, 1, rep.Lost)

	// A delivered mention forgotten by the endpoint, with no outbox row.
	s.endpoint.mu.Lock()
	delete(s.endpoint.delivered, [2]string{mention.Mentions[0], mention.ID})
	s.endpoint.mu.Unlock()
	rep = check()
	require.Equal(t, 1, rep.MentionsLost)
	require.Equal(t, 2, rep.Lost)

	// A coordinate's newest version gone.
	require.EqualValues(t, 1, deleteRows(t, pool, `DELETE FROM events WHERE kind = 30078 AND pubkey = decode($1, 'hex') AND d_tag = $2`, readState.Author, readState.D))
	rep = check()
	require.Equal(t, 1, rep.ReadStateLost)
	require.Equal(t, 3, rep.Lost)

	// An audit entry gone (past the append-only trigger): missing, and the
	// chain no longer verifies.
	require.EqualValues(t, 1, deleteRows(t, pool, `DELETE FROM audit_log WHERE action = 'event_created' AND object_id = $1`, mention.ID))
	rep = check()
	require.Equal(t, 1, rep.AuditMissing)
	require.Equal(t, 4, rep.Lost)
	require.Contains(t, []int{rep.AuditVerify[mention.Host]}, 1, "audit verify fails: %v", rep.AuditVerify)
	require.False(t, rep.ok())
}

// hasLaterAuditEntry reports whether the audit entry of event id is
// followed by another entry of the same community's chain.
func hasLaterAuditEntry(t *testing.T, pool *pgxpool.Pool, id string) bool {
	t.Helper()
	var later bool
	require.NoError(t, pool.QueryRow(t.Context(), `
		SELECT EXISTS (
		  SELECT 1 FROM audit_log a JOIN audit_log b
		    ON b.community_id = a.community_id AND b.seq > a.seq
		   WHERE a.action = 'event_created' AND a.object_id = $1)`, id).Scan(&later))
	return later
}

// deleteRows runs a DELETE past the triggers that guard the table (the
// relay's own writes never could) and returns how many rows it removed.
func deleteRows(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
	_, err = tx.Exec(t.Context(), `SET LOCAL session_replication_role = replica`)
	require.NoError(t, err)
	tag, err := tx.Exec(t.Context(), query, args...)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(t.Context()))
	return tag.RowsAffected()
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--faults", "meteor"}, `unknown fault "meteor"`},
		{[]string{"--faults", "redis"}, "needs --relays 2"},
		{[]string{"--conns", "2"}, "--conns ≥ 3"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--relay-env", "NOEQUALS"}, `want KEY=value`},
		{[]string{"--pace", "-1ms"}, "--pace must not be negative"},
	} {
		_, err := parseConfig(append([]string{"--relay-bin", relayBin}, c.args...), io.Discard)
		require.ErrorContains(t, err, c.want, strings.Join(c.args, " "))
	}
	cfg, err := parseConfig([]string{"--relay-bin", relayBin, "--faults", "all", "--relays", "2"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, faultNames, cfg.faults)
}
