package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nbd-wtf/go-nostr"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// auditBundle is an operator's environment with a relay key on a database
// of its own, and a pool on it for setting up and tampering with chains.
type auditBundle struct {
	env  map[string]string
	pool *pgxpool.Pool
	key  []byte
}

func setupAudit(t *testing.T) *auditBundle {
	t.Helper()
	pool, url := dbtest.NewDB(t)
	key := event.GenerateKey()
	env := baseEnv()
	env["DATABASE_URL"] = url
	env["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(key)
	return &auditBundle{env: env, pool: pool, key: key}
}

func (b *auditBundle) run(t *testing.T, args ...string) result {
	t.Helper()
	return runBinary(t, b.env, args...)
}

// community creates host and chains n event_created entries in it.
func (b *auditBundle) community(t *testing.T, host string, n int) string {
	t.Helper()
	var id string
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO communities (host) VALUES ($1) RETURNING id::text`, host).Scan(&id))
	b.grow(t, id, n)
	return id
}

// grow chains n more entries.
func (b *auditBundle) grow(t *testing.T, cid string, n int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		for i := range n {
			id := fmt.Sprintf("%064x", time.Now().UnixNano()+int64(i))
			if err := audit.Append(ctx, tx, audit.NewEventCreated(cid, strings.Repeat("ab", 32), id, 9, "")); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, audit.NewChainer(audit.ChainerConfig{Pool: b.pool}).Flush(ctx))
}

// head exports a checkpoint into a file and returns its path and event.
func (b *auditBundle) head(t *testing.T, host string) (string, map[string]any) {
	t.Helper()
	res := b.run(t, "audit", "head", "--community", host)
	require.Equal(t, 0, res.Code, res.Stderr)
	require.Empty(t, res.Stderr, "no terminal: no summary")
	lines := res.lines(t)
	require.Len(t, lines, 1)
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	require.NoError(t, os.WriteFile(path, []byte(res.Stdout), 0o600))
	return path, lines[0]
}

// tamper runs statements with the append-only triggers disabled.
func (b *auditBundle) tamper(t *testing.T, stmts ...string) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		for _, s := range append(append([]string{`ALTER TABLE audit_log DISABLE TRIGGER USER`}, stmts...), `ALTER TABLE audit_log ENABLE TRIGGER USER`) {
			if _, err := tx.Exec(context.Background(), s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}))
}

// rehash recomputes every hash from seq onwards, as someone with write
// access who wants plain verify to pass would.
func (b *auditBundle) rehash(t *testing.T, cid string, from int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `SELECT seq, prev_hash, action, actor_pubkey, object_id, detail, created_at
		FROM audit_log WHERE community_id = $1 AND seq >= $2 ORDER BY seq`, cid, from)
	require.NoError(t, err)
	type r struct {
		seq     int64
		prev    []byte
		action  string
		actor   []byte
		object  *string
		detail  []byte
		created time.Time
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (r, error) {
		var x r
		return x, row.Scan(&x.seq, &x.prev, &x.action, &x.actor, &x.object, &x.detail, &x.created)
	})
	require.NoError(t, err)
	var stmts []string
	prev := list[0].prev
	for _, x := range list {
		h, err := audit.Hash(audit.Entry{CommunityID: cid, Seq: x.seq, CreatedAt: x.created, Action: audit.Action(x.action),
			Actor: x.actor, ObjectID: x.object, Detail: x.detail, PrevHash: prev, Version: 2})
		require.NoError(t, err)
		stmts = append(stmts, fmt.Sprintf(`UPDATE audit_log SET hash = '\x%x', prev_hash = %s WHERE community_id = '%s' AND seq = %d`,
			h, byteaLit(prev), cid, x.seq))
		prev = h[:]
	}
	// Hashes are unique per community: move them out of the way first.
	b.tamper(t, append([]string{fmt.Sprintf(`UPDATE audit_log SET hash = sha256(hash) WHERE community_id = '%s' AND seq >= %d`, cid, from)}, stmts...)...)
}

func byteaLit(b []byte) string {
	if b == nil {
		return "NULL"
	}
	return fmt.Sprintf(`'\x%x'`, b)
}

// Checks 31–36: checkpoints, the honest limit and the CLI's exit codes.
func TestAuditCommand(t *testing.T) {
	t.Parallel()

	t.Run("FullRewriteCaughtByCheckpoint", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		cid := b.community(t, "a.test", 50)
		cp, _ := b.head(t, "a.test")
		b.tamper(t, `UPDATE audit_log SET actor_pubkey = '\x`+strings.Repeat("11", 32)+`' WHERE community_id = '`+cid+`' AND seq = 10`)
		res := b.run(t, "audit", "verify", "--community", "a.test")
		require.Equal(t, 1, res.Code)
		require.Equal(t, "FAILED a.test: hash mismatch at seq 10: stored hash does not match recomputed hash\n", res.Stdout)
		b.rehash(t, cid, 10)
		res = b.run(t, "audit", "verify", "--community", "a.test")
		require.Equal(t, 0, res.Code, "the honest limit: a consistent rewrite passes plain verify\n%s", res.Stdout)
		res = b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", cp)
		require.Equal(t, 1, res.Code, res.Stdout)
		require.Equal(t, "FAILED a.test: checkpoint mismatch at seq 50: the chain was rewritten after the checkpoint was taken\n", res.Stdout)
	})

	t.Run("CheckpointStillMatches", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		cid := b.community(t, "a.test", 50)
		cp, ev := b.head(t, "a.test")
		b.grow(t, cid, 100)
		res := b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", cp)
		require.Equal(t, 0, res.Code, res.Stdout+res.Stderr)
		require.Empty(t, res.Stderr, "piped: nothing on stderr on success")
		require.Regexp(t, `^verified a\.test: seq 1\.\.150 \(150 entries\) in \S+\ncheckpoint seq 50 matches \(taken \S+, signed by npub1\S+\)\n$`, res.Stdout)

		// An independent library verifies the checkpoint; its tags equal R2.
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		var nev nostr.Event
		require.NoError(t, json.Unmarshal(raw, &nev))
		ok, err := nev.CheckSignature()
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, 48002, nev.Kind)
		require.Equal(t, event.PubKey(b.key), nev.PubKey)
		var hash string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT encode(hash, 'hex') FROM audit_log WHERE community_id = $1 AND seq = 50`, cid).Scan(&hash))
		require.Equal(t, nostr.Tags{{"host", "a.test"}, {"seq", "50"}, {"hash", hash}}, nev.Tags)
		require.Contains(t, res.Stdout, "signed by "+mustNpub(t, nev.PubKey))

		res = b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", cp, "--json")
		require.Equal(t, 0, res.Code)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &out))
		require.ElementsMatch(t, []string{"host", "from", "to", "entries", "ok", "error", "checkpoint"}, keys(out))
		require.ElementsMatch(t, []string{"seq", "hash", "taken_at", "signer", "matched"}, keys(out["checkpoint"].(map[string]any)))
		require.Equal(t, true, out["ok"])
		require.Nil(t, out["error"])
		require.Equal(t, true, out["checkpoint"].(map[string]any)["matched"])
		require.EqualValues(t, 150, out["entries"])
	})

	t.Run("TailRemoved", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		cid := b.community(t, "a.test", 60)
		cp, _ := b.head(t, "a.test")
		require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(context.Background(), `SET LOCAL buzz.audit_purge = 'on'`); err != nil {
				return err
			}
			_, err := tx.Exec(context.Background(), `DELETE FROM audit_log WHERE community_id = $1 AND seq >= 41`, cid)
			return err
		}))
		res := b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", cp)
		require.Equal(t, 1, res.Code)
		require.Equal(t, "FAILED a.test: chain ends at seq 40, before checkpoint seq 60: entries were removed\n", res.Stdout)
	})

	t.Run("BadCheckpoints", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		b.community(t, "a.test", 5)
		b.community(t, "b.test", 5)
		cp, ev := b.head(t, "a.test")
		dir := t.TempDir()
		write := func(name string, v any) string {
			raw, err := json.Marshal(v)
			require.NoError(t, err)
			p := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(p, raw, 0o600))
			return p
		}
		edited := map[string]any{}
		for k, v := range ev {
			edited[k] = v
		}
		edited["tags"] = []any{[]any{"host", "a.test"}, []any{"seq", "5"}, []any{"hash", strings.Repeat("0", 64)}}
		res := b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", write("edited.json", edited))
		require.Equal(t, 2, res.Code)
		require.Equal(t, "checkpoint: invalid signature\n", res.Stderr)

		other := event.GenerateKey()
		foreign := *b
		foreign.env = map[string]string{}
		for k, v := range b.env {
			foreign.env[k] = v
		}
		foreign.env["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(other)
		fcp, _ := foreign.head(t, "a.test")
		res = b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", fcp)
		require.Equal(t, 2, res.Code)
		require.Equal(t, "checkpoint: signed by "+event.PubKey(other)+", expected "+event.PubKey(b.key)+"\n", res.Stderr)
		res = b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", fcp, "--signer", event.PubKey(other))
		require.Equal(t, 0, res.Code, "a rotated key is trusted with --signer")

		res = b.run(t, "audit", "verify", "--community", "b.test", "--checkpoint", cp)
		require.Equal(t, 2, res.Code)
		require.Equal(t, "checkpoint: for a different community\n", res.Stderr)

		notes := write("note.json", map[string]any{"kind": 1})
		res = b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", notes)
		require.Equal(t, 2, res.Code)
		require.Equal(t, "checkpoint: not a valid event\n", res.Stderr)
		wrongKind := eventtest.Key{SK: b.key, PubKey: event.PubKey(b.key)}.Signed(t, 1, eventtest.Tag("host", "a.test"))
		res = b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", write("kind.json", wrongKind))
		require.Equal(t, 2, res.Code)
		require.Equal(t, "checkpoint: wrong kind\n", res.Stderr)
		badTags := eventtest.Key{SK: b.key, PubKey: event.PubKey(b.key)}.Signed(t, 48002, eventtest.Tag("host", "a.test"), eventtest.Tag("seq", "x"), eventtest.Tag("hash", "y"))
		res = b.run(t, "audit", "verify", "--community", "a.test", "--checkpoint", write("tags.json", badTags))
		require.Equal(t, 2, res.Code)
		require.Equal(t, "checkpoint: malformed tags\n", res.Stderr)

		noKey := map[string]string{}
		for k, v := range b.env {
			noKey[k] = v
		}
		delete(noKey, "BUZZ_RELAY_PRIVATE_KEY")
		res = runBinary(t, noKey, "audit", "verify", "--community", "a.test", "--checkpoint", cp)
		require.Equal(t, 2, res.Code)
		require.Equal(t, "checkpoint: no trusted signer (set BUZZ_RELAY_PRIVATE_KEY or --signer)\n", res.Stderr)
	})

	t.Run("HeadAndRanges", func(t *testing.T) { // checks 13, 35 and the usage exits
		t.Parallel()
		b := setupAudit(t)
		b.community(t, "a.test", 3)
		b.community(t, "empty.test", 0)
		noKey := map[string]string{}
		for k, v := range b.env {
			noKey[k] = v
		}
		delete(noKey, "BUZZ_RELAY_PRIVATE_KEY")
		res := runBinary(t, noKey, "audit", "head", "--community", "a.test")
		require.Equal(t, 2, res.Code)
		require.Equal(t, "audit head needs a stable relay key: set BUZZ_RELAY_PRIVATE_KEY\n", res.Stderr)
		res = b.run(t, "audit", "head", "--community", "empty.test")
		require.Equal(t, 3, res.Code)
		require.Equal(t, "audit chain of empty.test is empty\n", res.Stderr)
		res = b.run(t, "audit", "head", "--community", "nowhere.test")
		require.Equal(t, 2, res.Code)
		require.Equal(t, "no community is configured for host nowhere.test\n", res.Stderr)
		res = b.run(t, "audit", "verify", "--community", "empty.test")
		require.Equal(t, 3, res.Code)
		res = b.run(t, "audit", "verify", "--community", "a.test", "--from", "3", "--to", "2")
		require.Equal(t, 2, res.Code)
		res = b.run(t, "audit", "verify", "--community", "a.test", "--from", "2", "--to", "3")
		require.Equal(t, 0, res.Code)
		require.Regexp(t, `^verified a\.test: seq 2\.\.3 \(2 entries\)`, res.Stdout)
		res = b.run(t, "audit", "verify", "--community", "a.test", "--from", "9", "--to", "12")
		require.Equal(t, 3, res.Code)
	})

	t.Run("ProgressOnTerminal", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("script"); err != nil {
			t.Fatalf("script (util-linux) is needed for the pseudo-terminal test: %v", err)
		}
		b := setupAudit(t)
		b.community(t, "a.test", 20)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "script", "-qec", binary+" audit verify --community a.test", "/dev/null")
		cmd.Env = environ(b.env)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		require.Contains(t, string(out), "20/20 entries")
		require.Contains(t, string(out), "ETA")
		require.Contains(t, string(out), "verified a.test: seq 1..20 (20 entries)")
	})
}

func mustNpub(t *testing.T, pub string) string {
	t.Helper()
	// Known vector of NIP-19.
	require.Equal(t, "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6",
		npub("3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"))
	return npub(pub)
}

// publishInFlight is how many events each publisher keeps unanswered: the
// relay's group commit then sees concurrent inserts on every connection,
// and the tests reach their event counts several times sooner.
const publishInFlight = 8

// publish authenticates as a new key and publishes kind 1 events until stop
// closes or the connection ends (the relay killed), publishInFlight at a
// time, sending the id of each event answered OK true to okIDs. It returns
// once every answer it will get has been read: after stop, the events in
// flight get their answers (or 5 s pass) before the connection closes.
func publish(t *testing.T, p *relayProc, hostHeader string, stop <-chan struct{}, okIDs chan<- string) {
	key := eventtest.NewKey()
	w := dialWS(t, p, hostHeader)
	w.auth(key, "ws://"+hostHeader)
	slots := make(chan struct{}, publishInFlight)
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			msg, err := w.read()
			if err != nil {
				return // closed, or killed
			}
			if len(msg) >= 3 && msg[0] == "OK" {
				if msg[2] == true {
					okIDs <- msg[1].(string)
				}
				<-slots
			}
		}
	}()
	defer func() {
		deadline := time.Now().Add(5 * time.Second)
		for len(slots) > 0 && time.Now().Before(deadline) {
			select {
			case <-read:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		_ = w.c.CloseNow()
		<-read
	}()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-read:
			return
		case slots <- struct{}{}:
		}
		ev := key.Signed(t, 1, eventtest.Content("msg "+strconv.Itoa(i)))
		b, _ := json.Marshal([]any{"EVENT", ev})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := w.c.Write(ctx, 1, b)
		cancel()
		if err != nil {
			return
		}
	}
}

// okCollector gathers the ids publish sends as they come, so a reader of
// publish never blocks on a full channel: the events still in flight when
// a test has its count get their answers after it.
type okCollector struct {
	C    chan string // handed to publish
	mu   sync.Mutex
	ids  []string
	done chan struct{}
}

func collectOKs() *okCollector {
	c := &okCollector{C: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for id := range c.C {
			c.mu.Lock()
			c.ids = append(c.ids, id)
			c.mu.Unlock()
		}
	}()
	return c
}

// IDs returns the ids gathered so far.
func (c *okCollector) IDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// Close ends the gathering, once every publish has returned, and returns
// every id.
func (c *okCollector) Close() []string {
	close(c.C)
	<-c.done
	return c.ids
}

// auditState reads, per community, the chain's event_created objects and
// checks seq contiguity and the empty outbox.
func auditState(t *testing.T, pool *pgxpool.Pool) (created map[string]int, pending int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_outbox) + (SELECT count(*) FROM audit_intent_groups)`).Scan(&pending))
	rows, err := pool.Query(ctx, `SELECT object_id FROM audit_log WHERE action = 'event_created'`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	created = map[string]int{}
	for _, id := range ids {
		created[id]++
	}
	var gaps int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT community_id, count(*) AS n, max(seq) AS m
		FROM audit_log GROUP BY community_id) x WHERE n <> m`).Scan(&gaps))
	require.Zero(t, gaps, "seq is 1..n in every community")
	return created, pending
}

// auditDrained waits up to d for the audit outbox to drain and returns
// auditState's event_created objects.
func auditDrained(t *testing.T, pool *pgxpool.Pool, d time.Duration) map[string]int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		created, pending := auditState(t, pool)
		if pending == 0 {
			return created
		}
		require.True(t, time.Now().Before(deadline), "the outbox drains within %s of the restart (%d pending)", d, pending)
		time.Sleep(50 * time.Millisecond)
	}
}

// The crash test: kill -9 while 8 connections publish; after
// restart every OK-true event has exactly one event_created entry, seq is
// contiguous and verify passes.
func TestAuditSurvivesKill(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	env := relayEnv(t)
	for k, v := range b.env {
		env[k] = v
	}
	p := startReady(t, env)
	okIDs := make(chan string, 100000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { publish(t, p, "localhost:3000", stop, okIDs) })
	}
	for len(okIDs) < 500 {
		select {
		case <-p.done:
			t.Fatal("relay exited")
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
	close(stop)
	wg.Wait()
	close(okIDs)
	var accepted []string
	for id := range okIDs {
		accepted = append(accepted, id)
	}
	require.GreaterOrEqual(t, len(accepted), 500)

	restarted := startReady(t, env)
	created := auditDrained(t, b.pool, 5*time.Second)
	for _, id := range accepted {
		require.Equal(t, 1, created[id], "event %s", id)
	}
	res := runBinary(t, restarted.Env, "audit", "verify", "--community", "localhost:3000")
	require.Equal(t, 0, res.Code, res.Stdout)
}

// Two relay processes on one database append to the same
// communities; every chain is 1..n, one entry per event, and verifies.
func TestAuditTwoProcesses(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	hosts := []string{"a.test", "b.test", "c.test"}
	for _, h := range hosts {
		b.run(t, "community", "add", "--host", h)
	}
	var procs []*relayProc
	for range 2 {
		env := relayEnv(t)
		for k, v := range b.env {
			env[k] = v
		}
		procs = append(procs, startReady(t, env))
	}
	const total = 5000
	oks := collectOKs()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range procs {
		for _, h := range hosts {
			wg.Go(func() { publish(t, p, h, stop, oks.C) })
		}
	}
	for len(oks.IDs()) < total {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	accepted := oks.Close()
	for _, p := range procs {
		p.stop() // graceful: each chains what is pending
	}
	created, pending := auditState(t, b.pool)
	require.Zero(t, pending)
	for _, id := range accepted {
		require.Equal(t, 1, created[id], "event %s", id)
	}
	for _, h := range hosts {
		res := b.run(t, "audit", "verify", "--community", h)
		require.Equal(t, 0, res.Code, res.Stdout)
	}
}
