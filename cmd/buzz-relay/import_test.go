package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/export"
	"github.com/buzz-relay/buzz/internal/importer"
)

// writeExport writes an export of lines with a header based on h and a
// trailer that matches them, and returns its path.
func writeExport(t *testing.T, h export.Header, lines []string) string {
	t.Helper()
	h.Events = int64(len(lines))
	head, err := json.Marshal(h)
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString(string(head) + "\n")
	sum := sha256.New()
	for _, l := range lines {
		b.WriteString(l + "\n")
		sum.Write([]byte(l + "\n"))
	}
	tr, err := json.Marshal(export.Trailer{Type: "trailer", Events: int64(len(lines)), SHA256: hex.EncodeToString(sum.Sum(nil))})
	require.NoError(t, err)
	b.WriteString(string(tr) + "\n")
	return writeFile(t, b.String())
}

func writeFile(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "team.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	return path
}

// gunzipExport parses the compressed export at path.
func gunzipExport(t *testing.T, path string) exportFile {
	t.Helper()
	gz, err := os.ReadFile(path)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	require.NoError(t, err)
	data, err := io.ReadAll(zr)
	require.NoError(t, err)
	return parseExport(t, string(data))
}

// runImport runs community import with args and requires exit 0.
func runImport(t *testing.T, env map[string]string, args ...string) importer.Summary {
	t.Helper()
	res := runBinary(t, env, append([]string{"community", "import", "--quiet"}, args...)...)
	require.Equal(t, 0, res.Code, "stdout: %s\nstderr: %s", res.Stdout, res.Stderr)
	var s importer.Summary
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &s), res.Stdout)
	return s
}

// clientLines are an export's event lines that clients signed, sorted:
// what two imports of one file must both hold.
func clientLines(f exportFile, relayPub string) []string {
	var out []string
	for i, ev := range f.events {
		if ev.PubKey != relayPub {
			out = append(out, f.lines[i])
		}
	}
	slices.Sort(out)
	return out
}

// ids are the ids of evs, sorted.
func ids(evs []event.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	slices.Sort(out)
	return out
}

// Checks of docs/OPERATIONS.md "Importing a community" on a real relay:
// a community exported and imported into another answers its members as
// the source does, twice importing is a no-op, an interrupted import
// continued ends like a whole one, a refused file imports nothing.
func TestCommunityImport(t *testing.T) {
	t.Parallel()
	const (
		restored = "restored.test"
		piped    = "piped.test"
		halved   = "halved.test"
		refused  = "refused.test"
	)
	env := externalEnv(t)
	relayKey := event.GenerateKey()
	relayPub := event.PubKey(relayKey)
	env["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(relayKey)
	for _, h := range []string{restored, piped, halved, refused} {
		require.Equal(t, 0, runBinary(t, env, "community", "add", "--host", h).Code)
	}
	p := startReady(t, env)

	owner, member, outsider := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	stored, deleted, _ := publishTeam(t, authedPeer(t, p, "owner", owner), authedPeer(t, p, "member", member), owner, member)
	var open, priv string
	for _, ev := range stored {
		for _, tag := range ev.Tags {
			switch {
			case ev.Kind != 9 || tag[0] != "h":
			case ev.Content == "hello, team":
				open = tag[1]
			case ev.Content == "the secret plan":
				priv = tag[1]
			}
		}
	}
	require.NotEmpty(t, open)
	require.NotEmpty(t, priv)

	// Wait for the chain head, so that the header carries a checkpoint.
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
	dir := t.TempDir()
	file := filepath.Join(dir, "team.jsonl.gz")
	runExport(t, env, "--host", deploymentHost, "--output", file)
	fileHeader := gunzipExport(t, file).header // its own exported_at and checkpoint
	relaySigned := int64(len(f.events) - len(clientLines(f, relayPub)))

	s := runImport(t, env, "--host", restored, "--file", file)
	require.Equal(t, importer.Summary{Host: restored, Source: deploymentHost, Events: f.header.Events,
		Imported: f.header.Events - relaySigned, SkippedRelaySigned: relaySigned, Refused: map[string]int64{}}, s)

	t.Run("MembersReadTheSame", func(t *testing.T) {
		for _, who := range []struct {
			name string
			key  eventtest.Key
		}{{"owner", owner}, {"member", member}, {"outsider", outsider}} {
			src := authedPeer(t, p, who.name+"@source", who.key)
			dst := dialPeerHost(t, p, who.name+"@restored", restored)
			dst.auth(who.key)
			for _, ch := range []string{open, priv} {
				a, closedA := src.req("a", channelFilter(ch))
				b, closedB := dst.req("b", channelFilter(ch))
				require.Equal(t, ids(a), ids(b), "%s: channel %s", who.name, ch)
				require.Equal(t, closedA, closedB, "%s: channel %s", who.name, ch)
			}
			a, _ := src.req("rs", map[string]any{"kinds": []int{event.KindAppData}, "authors": []string{who.key.PubKey}})
			b, _ := dst.req("rs", map[string]any{"kinds": []int{event.KindAppData}, "authors": []string{who.key.PubKey}})
			require.Equal(t, ids(a), ids(b), "%s: read state", who.name)
			gone, _ := dst.req("gone", map[string]any{"ids": []string{deleted.ID}})
			require.Empty(t, gone, "%s: the deleted message stays deleted", who.name)
		}
		m := dialPeerHost(t, p, "member@restored", restored)
		m.auth(member)
		secret, _ := m.req("p", channelFilter(priv))
		require.Len(t, secret, 1, "a member of the private channel reads it")
		o := dialPeerHost(t, p, "outsider@restored", restored)
		o.auth(outsider)
		none, _ := o.req("p", channelFilter(priv))
		require.Empty(t, none, "a non-member does not")
	})

	g := parseExport(t, runExport(t, env, "--host", restored).Stdout)
	t.Run("SameEventsRelaySignedAgain", func(t *testing.T) {
		require.Equal(t, clientLines(f, relayPub), clientLines(g, relayPub))
		require.Equal(t, f.header.Deleted, g.header.Deleted)
		kinds := func(f exportFile) map[int]int {
			out := map[int]int{}
			for _, ev := range f.events {
				if ev.PubKey == relayPub {
					out[ev.Kind]++
				}
			}
			return out
		}
		require.Equal(t, kinds(f), kinds(g), "the relay-signed state, written again by this relay")
	})

	t.Run("ReimportIsANoOp", func(t *testing.T) {
		res := runBinary(t, env, "community", "import", "--host", restored, "--file", file)
		require.Equal(t, 2, res.Code, res.Stderr)
		require.Contains(t, res.Stderr, "community import: community "+restored+" already holds")
		again := runImport(t, env, "--host", restored, "--file", file, "--merge")
		require.Equal(t, importer.Summary{Host: restored, Source: deploymentHost, Events: f.header.Events,
			Duplicates: f.header.Events - relaySigned, SkippedRelaySigned: relaySigned, Refused: map[string]int64{}}, again)
		h := parseExport(t, runExport(t, env, "--host", restored).Stdout)
		require.Equal(t, g.lines, h.lines)
	})

	t.Run("StdinGzip", func(t *testing.T) {
		gz, err := os.ReadFile(file)
		require.NoError(t, err)
		res := runBinaryInput(t, env, bytes.NewReader(gz), "community", "import", "--host", piped, "--progress", "json")
		require.Equal(t, 0, res.Code, res.Stderr)
		var s importer.Summary
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &s), res.Stdout)
		require.Equal(t, f.header.Events-relaySigned, s.Imported)
		lines := strings.Split(strings.TrimSpace(res.Stderr), "\n")
		var last map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last), res.Stderr)
		require.Equal(t, float64(f.header.Events), last["done"], "JSON progress on stderr")
		h := parseExport(t, runExport(t, env, "--host", piped).Stdout)
		require.Equal(t, clientLines(g, relayPub), clientLines(h, relayPub))
	})

	t.Run("InterruptedThenContinued", func(t *testing.T) {
		half := writeExport(t, f.header, f.lines[:len(f.lines)/2])
		first := runImport(t, env, "--host", halved, "--file", half)
		require.Positive(t, first.Imported)
		rest := runImport(t, env, "--host", halved, "--file", file, "--merge")
		require.Equal(t, first.Imported, rest.Duplicates)
		require.Equal(t, f.header.Events-relaySigned, first.Imported+rest.Imported)
		h := parseExport(t, runExport(t, env, "--host", halved).Stdout)
		require.Equal(t, clientLines(g, relayPub), clientLines(h, relayPub))
		require.Equal(t, g.header.Deleted, h.header.Deleted)
	})

	t.Run("AuditRecordsTheImport", func(t *testing.T) {
		pool, err := pgxpool.New(context.Background(), env["DATABASE_URL"])
		require.NoError(t, err)
		defer pool.Close()
		var detail map[string]any
		deadline := time.Now().Add(20 * time.Second)
		for {
			var raw []byte
			err := pool.QueryRow(context.Background(), `SELECT detail FROM audit_log a JOIN communities c ON c.id = a.community_id
				WHERE c.host = $1 AND a.action = 'community_imported'`, restored).Scan(&raw)
			if err == nil {
				require.NoError(t, json.Unmarshal(raw, &detail))
				break
			}
			require.True(t, time.Now().Before(deadline), "no community_imported entry: %v", err)
			time.Sleep(100 * time.Millisecond) // polling interval
		}
		require.Equal(t, deploymentHost, detail["source_host"])
		require.Equal(t, float64(fileHeader.Audit.Seq), detail["audit_seq"])
		require.Equal(t, fileHeader.Audit.Hash, detail["audit_hash"])
		require.Equal(t, f.trailer.SHA256, detail["sha256"])
		cp, err := json.Marshal(detail["checkpoint"])
		require.NoError(t, err)
		require.JSONEq(t, string(fileHeader.Checkpoint), string(cp))
		res := runBinary(t, env, "audit", "verify", "--community", restored)
		require.Equal(t, 0, res.Code, "%s%s", res.Stdout, res.Stderr)
	})

	t.Run("RefusedFiles", func(t *testing.T) {
		whole := runExport(t, env, "--host", deploymentHost).Stdout
		all := strings.SplitAfter(whole, "\n")
		all = all[:len(all)-1] // the empty string after the last "\n"
		root := f.indexOf(stored[slices.IndexFunc(stored, func(ev event.Event) bool { return ev.Content == "hello, team" })].ID)
		tampered := slices.Clone(all)
		tampered[root+1] = strings.Replace(tampered[root+1], "hello, team", "hello, tean", 1)
		badHash := slices.Clone(all)
		badHash[len(badHash)-1] = strings.Replace(badHash[len(badHash)-1], f.trailer.SHA256, strings.Repeat("0", 64), 1)
		v2 := slices.Clone(all)
		v2[0] = strings.Replace(v2[0], `"version":1`, `"version":2`, 1)
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, err := zw.Write([]byte(whole))
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		n := len(all)
		for _, tc := range []struct {
			name, data, want string
		}{
			{"Tampered", strings.Join(tampered, ""), "community import: refused: line " + strconv.Itoa(root+2) + ": the id "},
			{"NoTrailer", strings.Join(all[:n-1], ""), "community import: refused: line " + strconv.Itoa(n) + ": the file ends without a trailer"},
			{"CutLine", strings.Join(all[:n-1], "") + all[n-1][:10], "community import: refused: line " + strconv.Itoa(n) + ": the line has no end"},
			{"CutGzip", gz.String()[:gz.Len()/2], "community import: refused: line "},
			{"BadHash", strings.Join(badHash, ""), "community import: refused: line " + strconv.Itoa(n) + ": the trailer's SHA-256"},
			{"Version2", strings.Join(v2, ""), "community import: refused: line 1: format version 2 is not supported"},
		} {
			res := runBinary(t, env, "community", "import", "--quiet", "--host", refused, "--file", writeFile(t, tc.data))
			require.Equal(t, 1, res.Code, "%s: %s", tc.name, res.Stderr)
			require.Contains(t, res.Stderr, tc.want, tc.name)
			require.Empty(t, res.Stdout, tc.name)
		}
		require.Empty(t, parseExport(t, runExport(t, env, "--host", refused).Stdout).events, "nothing imported")
	})
}
