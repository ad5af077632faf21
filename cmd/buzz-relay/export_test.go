package main

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/export"
)

// exportFile is a parsed export: its header, event lines and trailer.
type exportFile struct {
	header  export.Header
	raw     map[string]any // the header as a JSON object
	lines   []string       // the event lines, without their "\n"
	events  []event.Event
	trailer export.Trailer
	// bodySum is the SHA-256 of the event lines, each with its "\n".
	bodySum string
}

// parseExport splits an export into its parts and checks the shape every
// export has: a header, event lines that are valid signed NIP-01 events
// in their canonical JSON, and a trailer whose count and hash are those
// of the event lines.
func parseExport(t *testing.T, data string) exportFile {
	t.Helper()
	require.True(t, strings.HasSuffix(data, "\n"), "the export ends with a newline")
	all := strings.Split(strings.TrimSuffix(data, "\n"), "\n")
	require.GreaterOrEqual(t, len(all), 2, "header and trailer at least")
	var f exportFile
	require.NoError(t, json.Unmarshal([]byte(all[0]), &f.header), all[0])
	require.NoError(t, json.Unmarshal([]byte(all[0]), &f.raw))
	require.Equal(t, "header", f.header.Type)
	require.Equal(t, export.Format, f.header.Format)
	require.Equal(t, 1, f.header.Version)
	require.NoError(t, json.Unmarshal([]byte(all[len(all)-1]), &f.trailer), all[len(all)-1])
	require.Equal(t, "trailer", f.trailer.Type)
	f.lines = all[1 : len(all)-1]
	sum := sha256.New()
	seen := map[string]bool{}
	for i, line := range f.lines {
		ev, err := event.Parse([]byte(line))
		require.NoError(t, err, "line %d: %s", i+2, line)
		_, ok := ev.CheckID()
		require.True(t, ok, "line %d: id", i+2)
		require.True(t, ev.VerifySignature(), "line %d: signature", i+2)
		require.Equal(t, string(ev.AppendJSON(nil)), line, "line %d: canonical NIP-01 JSON", i+2)
		require.False(t, seen[ev.ID], "line %d: %s twice", i+2, ev.ID)
		seen[ev.ID] = true
		f.events = append(f.events, ev)
		sum.Write([]byte(line + "\n"))
	}
	f.bodySum = hex.EncodeToString(sum.Sum(nil))
	require.Equal(t, f.header.Events, int64(len(f.lines)), "header count = event lines")
	require.Equal(t, f.trailer.Events, int64(len(f.lines)), "trailer count = event lines")
	require.Equal(t, f.bodySum, f.trailer.SHA256, "trailer hash = SHA-256 of the event lines")
	return f
}

// indexOf returns the line of id in the export, -1 when it is not there.
func (f exportFile) indexOf(id string) int {
	return slices.IndexFunc(f.events, func(ev event.Event) bool { return ev.ID == id })
}

// publishTeam publishes a small community through w as owner, with
// member: a profile, an open and a private channel, messages in both, a
// reply, an edit, a reaction, a deleted message and its deletion, and two
// read-state versions. It returns the events that must be in an export, in
// the order they were committed, the deleted message, and the superseded
// read-state event (hard-deleted by its successor, so in no export).
func publishTeam(t *testing.T, w, mw *peer, owner, member eventtest.Key) (stored []event.Event, deleted, superseded event.Event) {
	t.Helper()
	pub := func(w *peer, ev event.Event) event.Event {
		w.mustPublish(ev)
		stored = append(stored, ev)
		return ev
	}
	pub(w, owner.Signed(t, event.KindProfile, eventtest.Content(`{"name":"owner"}`)))
	open := createChannel(t, w, owner) // the 9007s are checked by kind
	priv := createChannel(t, w, owner, private)
	pub(w, addMember(t, owner, priv, member.PubKey))
	root := pub(w, message(t, owner, open, "hello, team"))
	pub(mw, message(t, member, priv, "the secret plan"))
	pub(w, owner.Signed(t, 9, eventtest.Channel(open), eventtest.Content("re: hello"),
		eventtest.Tag("e", root.ID, "", "root"), eventtest.Tag("e", root.ID, "", "reply")))
	pub(w, owner.Signed(t, 40003, eventtest.Channel(open), eventtest.Content("hello, team!"), eventtest.Tag("e", root.ID)))
	pub(w, owner.Signed(t, event.KindReaction, eventtest.Channel(open), eventtest.Content("+"), eventtest.Tag("e", root.ID),
		eventtest.Tag("p", owner.PubKey)))
	deleted = pub(w, message(t, owner, open, "oops"))
	pub(w, owner.Signed(t, event.KindDeletion, eventtest.Tag("e", deleted.ID), eventtest.Tag("k", "9")))
	slot := "read-state:" + strings.Repeat("ab", 16)
	now := time.Now().Unix()
	superseded = owner.Signed(t, event.KindAppData, eventtest.Tag("d", slot), eventtest.Tag("t", "read-state"),
		eventtest.At(now-10), eventtest.Content("nip44-1"))
	w.mustPublish(superseded)
	pub(w, owner.Signed(t, event.KindAppData, eventtest.Tag("d", slot), eventtest.Tag("t", "read-state"),
		eventtest.At(now-5), eventtest.Content("nip44-2")))
	return stored, deleted, superseded
}

// runExport runs community export with args on env and requires exit 0.
func runExport(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	res := runBinary(t, env, append([]string{"community", "export"}, args...)...)
	require.Equal(t, 0, res.Code, "stderr: %s", res.Stderr)
	return res
}

// Checks of docs/OPERATIONS.md "Exporting a community" on a real relay.
func TestCommunityExport(t *testing.T) {
	t.Parallel()
	const otherHost = "other.test"
	env := externalEnv(t)
	relayKey := event.GenerateKey()
	relayPub := event.PubKey(relayKey)
	env["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(relayKey)
	require.Equal(t, 0, runBinary(t, env, "community", "add", "--host", otherHost).Code)
	p := startReady(t, env)

	// Another community's events, which no export of the first may hold.
	otherIDs := map[string]bool{}
	{
		stop, ok := make(chan struct{}), make(chan string, 1024)
		done := make(chan struct{})
		go func() { defer close(done); publish(t, p, otherHost, stop, ok) }()
		for len(otherIDs) < 20 {
			select {
			case id := <-ok:
				otherIDs[id] = true
			case <-time.After(frameWait):
				t.Fatalf("other community: %d events published", len(otherIDs))
			}
		}
		close(stop)
		<-done
		for len(ok) > 0 {
			otherIDs[<-ok] = true
		}
	}

	owner, member := eventtest.NewKey(), eventtest.NewKey()
	w := authedPeer(t, p, "owner", owner)
	mw := authedPeer(t, p, "member", member)
	stored, deleted, superseded := publishTeam(t, w, mw, owner, member)
	cid := communityOf(t, env, deploymentHost)

	// The chain head is written by the chainer after the commits: wait
	// until an export names one.
	var f exportFile
	deadline := time.Now().Add(20 * time.Second)
	for {
		f = parseExport(t, runExport(t, env, "--host", deploymentHost).Stdout)
		if f.header.Audit != nil && f.header.AuditPending == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no chained head: %v", f.raw)
		time.Sleep(100 * time.Millisecond) // polling interval
	}

	t.Run("Header", func(t *testing.T) {
		h := f.header
		require.Equal(t, deploymentHost, h.Host)
		require.Equal(t, cid, h.CommunityID)
		require.NotNil(t, h.RelayPubkey)
		require.Equal(t, relayPub, *h.RelayPubkey)
		// The deleted message, and the versions of the private channel's
		// 39000–39002 that the 9000 replaced.
		require.Equal(t, int64(4), h.Deleted)
		require.Empty(t, h.NoCheckpoint)
		_, err := time.Parse(time.RFC3339, h.ExportedAt)
		require.NoError(t, err)
		cp, err := audit.ParseCheckpoint(h.Checkpoint)
		require.NoError(t, err, "%s", h.Checkpoint)
		require.Equal(t, audit.Checkpoint{Host: deploymentHost, Seq: h.Audit.Seq, Hash: h.Audit.Hash, TakenAt: cp.TakenAt, Signer: relayPub}, cp)
		// The checkpoint is one audit verify accepts for this chain.
		path := filepath.Join(t.TempDir(), "checkpoint.json")
		require.NoError(t, os.WriteFile(path, h.Checkpoint, 0o600))
		res := runBinary(t, env, "audit", "verify", "--community", deploymentHost, "--checkpoint", path)
		require.Equal(t, 0, res.Code, "%s%s", res.Stdout, res.Stderr)
	})

	t.Run("EventsAsSignedInCommitOrder", func(t *testing.T) {
		last := -1
		for _, ev := range stored {
			i := f.indexOf(ev.ID)
			require.GreaterOrEqual(t, i, 0, "kind %d %s is exported", ev.Kind, ev.ID)
			require.Equal(t, string(ev.AppendJSON(nil)), f.lines[i], "exactly as signed")
			require.Greater(t, i, last, "kind %d after the event committed before it", ev.Kind)
			last = i
		}
		require.Greater(t, f.indexOf(deleted.ID), -1, "a soft-deleted event is exported, before its deletion")
		require.Equal(t, -1, f.indexOf(superseded.ID), "a superseded read-state head is not stored")
		// The channels' 9007s and the relay-signed state each created.
		add := f.indexOf(stored[slices.IndexFunc(stored, func(ev event.Event) bool { return ev.Kind == 9000 })].ID)
		creates, relaySigned := 0, map[int]int{}
		for i, ev := range f.events {
			if ev.Kind == 9007 {
				creates++
				require.Less(t, i, add, "both channels exist before the 9000 into one")
			}
			if ev.PubKey == relayPub {
				relaySigned[ev.Kind]++
			}
		}
		require.Equal(t, 2, creates)
		for _, k := range []int{39000, 39001, 39002} {
			require.Positive(t, relaySigned[k], "relay-signed kind %d", k)
		}
		for _, ev := range f.events {
			require.False(t, otherIDs[ev.ID], "an event of %s", otherHost)
		}
	})

	t.Run("GzipAndOutputFile", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "team.jsonl.gz")
		res := runExport(t, env, "--host", deploymentHost, "--output", out, "--progress", "json")
		summary := res.lines(t)
		require.Len(t, summary, 1)
		require.Equal(t, map[string]any{"host": deploymentHost, "community_id": cid, "output": out,
			"events": float64(f.header.Events), "deleted": float64(f.header.Deleted), "sha256": f.trailer.SHA256}, summary[0])
		gz, err := os.Open(out)
		require.NoError(t, err)
		defer gz.Close()
		st, err := gz.Stat()
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "an export holds private channels")
		zr, err := gzip.NewReader(gz)
		require.NoError(t, err)
		var b strings.Builder
		_, err = bufio.NewReader(zr).WriteTo(&b)
		require.NoError(t, err)
		g := parseExport(t, b.String())
		require.Equal(t, f.lines, g.lines, "the same snapshot content")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file left")
		// JSON progress lines on stderr, the last one complete.
		var last map[string]any
		for _, line := range strings.Split(strings.TrimSpace(res.Stderr), "\n") {
			last = nil
			require.NoError(t, json.Unmarshal([]byte(line), &last), line)
			require.Equal(t, "events", last["progress"])
		}
		require.Equal(t, float64(f.header.Events), last["done"])
		require.Equal(t, float64(f.header.Events), last["total"])

		// --progress bar draws the terminal's bar anywhere.
		res = runExport(t, env, "--host", deploymentHost, "--output", filepath.Join(dir, "bar.jsonl"), "--progress", "bar")
		require.Contains(t, res.Stderr, "\r[##############################] "+strconv.FormatInt(f.header.Events, 10)+"/"+
			strconv.FormatInt(f.header.Events, 10)+" events")
		require.Contains(t, res.Stderr, "ETA 0s")

		// --gzip to stdout, --quiet: nothing on stderr.
		res = runExport(t, env, "--host", deploymentHost, "--gzip", "--quiet")
		require.Empty(t, res.Stderr)
		zr, err = gzip.NewReader(strings.NewReader(res.Stdout))
		require.NoError(t, err)
		b.Reset()
		_, err = bufio.NewReader(zr).WriteTo(&b)
		require.NoError(t, err)
		require.Equal(t, f.lines, parseExport(t, b.String()).lines)
	})

	t.Run("NoRelayKey", func(t *testing.T) {
		noKey := maps.Clone(env)
		delete(noKey, "BUZZ_RELAY_PRIVATE_KEY")
		g := parseExport(t, runExport(t, noKey, "--host", deploymentHost).Stdout)
		require.Nil(t, g.raw["relay_pubkey"])
		require.Contains(t, g.raw, "relay_pubkey", "stated as null")
		require.NotContains(t, g.raw, "checkpoint")
		require.Equal(t, export.NoKey, g.header.NoCheckpoint)
		require.Equal(t, f.header.Audit, g.header.Audit, "the head is still named")
		require.Equal(t, f.lines, g.lines)
	})

	t.Run("OtherCommunity", func(t *testing.T) {
		g := parseExport(t, runExport(t, env, "--host", otherHost).Stdout)
		require.Len(t, g.events, len(otherIDs))
		for _, ev := range g.events {
			require.True(t, otherIDs[ev.ID], "only %s's events", otherHost)
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--host", "nowhere.test"}, "community export: no community is configured for host nowhere.test"},
			{[]string{"--host", deploymentHost, "--output", "/nonexistent-dir/x.jsonl"}, "community export: cannot write --output /nonexistent-dir/x.jsonl: no such file or directory"},
			{[]string{"--host", deploymentHost, "--output", t.TempDir()}, "community export: cannot write --output "},
			{[]string{"--host", deploymentHost, "--progress", "loud"}, "--progress must be auto, bar, json or none"},
			{[]string{}, "missing --host HOST"},
		} {
			res := runBinary(t, env, append([]string{"community", "export"}, tc.args...)...)
			require.Equal(t, 2, res.Code, "%v: %s", tc.args, res.Stderr)
			require.Contains(t, res.Stderr, tc.want, "%v", tc.args)
			require.Empty(t, res.Stdout, "%v", tc.args)
		}
	})
}

// TestCommunityExportWhilePublishing: exports taken while clients publish
// are each one snapshot: the header's count is the number of event lines,
// the trailer matches, and every event answered OK before the export
// started is in it.
func TestCommunityExportWhilePublishing(t *testing.T) {
	t.Parallel()
	env := externalEnv(t)
	p := startReady(t, env)

	oks := collectOKs()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { publish(t, p, deploymentHost, stop, oks.C) })
	}
	defer func() {
		close(stop)
		wg.Wait()
		oks.Close()
	}()
	acked := oks.IDs
	waitAcked := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for len(acked()) < n {
			require.True(t, time.Now().Before(deadline), "only %d events published", len(acked()))
			time.Sleep(20 * time.Millisecond) // polling interval
		}
	}

	prev := int64(0)
	for round := 1; round <= 3; round++ {
		waitAcked(round * 300)
		before := acked()
		f := parseExport(t, runExport(t, env, "--host", deploymentHost, "--quiet").Stdout)
		for _, id := range before {
			require.GreaterOrEqual(t, f.indexOf(id), 0, "round %d: %s was answered OK before the export", round, id)
		}
		require.Greater(t, f.header.Events, prev, "round %d: the community grew", round)
		prev = f.header.Events
		t.Logf("round %d: %d events exported, %d acked before", round, f.header.Events, len(before))
	}
}
