package benchdata

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestCheckLocal(t *testing.T) {
	t.Parallel()
	for url, ok := range map[string]bool{
		"postgres://buzz@/buzz?host=/tmp/x/pg/run&port=5432&sslmode=disable": true,
		"postgres://u@localhost:5432/db":                                     true,
		"postgres://u@127.0.0.1/db":                                          true,
		"postgres://u@[::1]:5433/db":                                         true,
		"host=/var/run/postgresql dbname=buzz":                               true,
		"postgres://u@db.example.com/db":                                     false,
		"postgres://u@10.0.0.5/db":                                           false,
		"postgres://u@localhost,db.example.com/db":                           false,
		"host=192.168.1.2 dbname=buzz":                                       false,
	} {
		err := checkLocal(url)
		if ok {
			require.NoError(t, err, url)
		} else {
			require.ErrorContains(t, err, "not a unix socket or loopback", url)
		}
	}
	_, err := parseConfig([]string{"--database-url", "postgres://u@8.8.8.8/db"}, nil)
	require.ErrorContains(t, err, "loopback")
	c, err := parseConfig(nil, map[string]string{"DATABASE_URL": "postgres://u@localhost/db"})
	require.NoError(t, err)
	require.Equal(t, "postgres://u@localhost/db", c.dbURL, "DATABASE_URL is the default")
	_, err = parseConfig(nil, nil)
	require.ErrorContains(t, err, "--database-url (or DATABASE_URL) is required")
}

// parseConfig parses args as the fixture subcommand does, with env as the
// environment.
func parseConfig(args []string, env map[string]string) (Config, error) {
	fs := pflag.NewFlagSet("fixture", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	done := Flags(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return done()
}

// fixture loads a fixture with args and returns its report and targets.
func fixture(t *testing.T, args ...string) (report, targets) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "targets.json")
	var out, errb strings.Builder
	cfg, err := parseConfig(append(args, "--targets", file), nil)
	require.NoError(t, err)
	require.Equal(t, 0, Run(t.Context(), cfg, &out, &errb), errb.String())
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out.String()), &rep), out.String())
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var tg targets
	require.NoError(t, json.Unmarshal(b, &tg))
	return rep, tg
}

// TestFixtureThroughRelay loads a small fixture into a running relay's
// database with c0 aliased to the relay's host, then reads it back over
// WebSocket with the four REQ shapes of buzz-bench.
func TestFixtureThroughRelay(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"RELAY_URL": "ws://deployment.invalid"})
	rep, tg := fixture(t, "--database-url", r.DBURL, "--events", "3000", "--communities", "3", "--authors", "8", "--alias", r.Host)
	require.Equal(t, 3000, rep.Events)
	require.Equal(t, 3000, rep.Mentions)
	require.Equal(t, []string{"c0.bench.local", "c1.bench.local", "c2.bench.local"}, rep.Hosts)
	require.Equal(t, r.Host, rep.TargetHost)
	require.Equal(t, 1000, rep.TargetEvents)
	require.Len(t, tg.Authors, 8)
	require.Equal(t, tg.Authors, tg.P)
	require.NotEmpty(t, tg.E)
	require.Equal(t, 9, tg.Kind)

	pool, err := pg.Open(t.Context(), r.DBURL, pg.PoolConfig{MaxConns: 1})
	require.NoError(t, err)
	defer pool.Close()
	var searchable, mentions int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE search_tsv IS NOT NULL) FROM events WHERE kind = 9`).Scan(&searchable))
	require.Equal(t, 3000, searchable, "PostgreSQL generated the search column")
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM event_mentions`).Scan(&mentions))
	require.Equal(t, 3000, mentions)

	c, err := client.Dial(t.Context(), "ws://"+r.Host, event.GenerateKey())
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	limit := 50
	query := func(f event.Filter) []event.Event {
		f.Kinds, f.Limit = []int{9}, &limit
		evs, err := c.Query(t.Context(), f)
		require.NoError(t, err)
		return evs
	}
	page := query(event.Filter{})
	require.Len(t, page, 50)
	authors := map[string]bool{}
	for _, a := range tg.Authors {
		authors[a] = true
	}
	for _, ev := range page {
		require.True(t, ev.VerifySignature(), "every event is really signed")
		require.True(t, authors[ev.PubKey], "the alias reads community c0 only")
		require.Len(t, strings.Fields(ev.Content), wordsPerEvent)
	}
	require.NotEmpty(t, query(event.Filter{Authors: tg.Authors[:1]}))
	require.NotEmpty(t, query(event.Filter{Tags: map[string][]string{"p": tg.P[:1]}}))
	for _, id := range tg.E[:min(len(tg.E), 5)] {
		require.NotEmpty(t, query(event.Filter{Tags: map[string][]string{"e": {id}}}), id)
	}
}

// TestFixtureDeterministic loads the same flags into a second database and
// gets the same targets.
func TestFixtureDeterministic(t *testing.T) {
	t.Parallel()
	_, a := dbtest.NewDB(t)
	_, b := dbtest.NewDB(t)
	args := []string{"--events", "400", "--communities", "2", "--authors", "4"}
	_, ta := fixture(t, append([]string{"--database-url", a}, args...)...)
	_, tb := fixture(t, append([]string{"--database-url", b}, args...)...)
	require.Equal(t, ta, tb)
	_, tc := fixture(t, append([]string{"--database-url", dbURL(t), "--seed", "2"}, args...)...)
	require.NotEqual(t, ta.Authors, tc.Authors, "another seed, other keys")
}

func dbURL(t *testing.T) string {
	_, u := dbtest.NewDB(t)
	return u
}
