package main

// The restore drill of docs/OPERATIONS.md "Backups and moving a team": a
// community published through real connections is exported from one relay,
// imported into a fresh relay (its own database, its own key, another
// host), and every member then asks both relays the same questions over
// the WebSocket and the HTTP bridge and must get the same answers.
//
// What "the same" means (drillSide.normal and drillSide.normals):
//
//   - An event a client signed must come back byte for byte, in the same
//     order among the answer's client-signed events: its canonical NIP-01
//     JSON (id, pubkey, created_at, kind, tags, content, sig) is compared
//     as it is. The import replays exactly what the authors signed.
//   - An event signed by the relay's key (the channel state 39000–39002,
//     the membership notices 44100/44101, the window overlays 39005–39007)
//     is signed again by the other relay: its pubkey, id and sig differ by
//     design; its created_at comes from the clock of the relay that wrote
//     it (an overlay's from the moment of the answer); and its place among
//     the events of one second follows its id. It is required to verify
//     against the answering relay's key and is compared on kind, tags and
//     content, with that relay's pubkey written as "<relay>" wherever it
//     occurs, as a set within the answer. A thread window's bounds (39007)
//     carry a binding that hashes the request's host
//     (docs/NIP-CW.md §5.5): its d tag is required to be the binding of
//     that relay's host and is then compared as "tw:1:<binding>".
//
// A comparison that holds on two empty answers proves nothing: every
// answer a member should get non-empty is required to be, and the members
// outside the private channel are checked to see none of its events on
// either relay. The import runs in a later second than every write, so
// state kept at the time of a write rather than of its event shows.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// drillMember is one key of the drilled community.
type drillMember struct {
	name string
	key  eventtest.Key
	// private says whether it is a member of the private channel at the end.
	private bool
}

// drillTeam is what the drill published on the source relay.
type drillTeam struct {
	members                        []drillMember
	general, random, forum, secret string // channel ids; secret is private
	root, secretRoot, forumPost    string // thread roots
	// replies are replies of the general thread, one of them deleted.
	replies []string
	// deleted are the ids of every event a deletion removed.
	deleted []string
	// secretIDs are the client-signed events of the private channel.
	secretIDs map[string]bool
}

// drillSide is one of the two relays as the members read it.
type drillSide struct {
	name     string
	p        *relayProc
	host     string
	relayPub string
}

// publishDrillTeam publishes the drilled community on src through one
// authenticated connection per member: profiles, two open channels, a forum
// and a private channel, a thread four levels deep with a broadcast reply,
// a private thread, edits, reactions, a deleted reaction, NIP-09 and
// moderator deletions, a member added to and removed from the private
// channel, a join, a metadata change, read state (each member's markers,
// one superseded) and application data.
func publishDrillTeam(t *testing.T, src *relayProc) drillTeam {
	t.Helper()
	alice, bob, carol, dave := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	team := drillTeam{members: []drillMember{{"alice", alice, true}, {"bob", bob, true}, {"carol", carol, false},
		{"dave", dave, false}}, secretIDs: map[string]bool{}}
	peers := map[string]*peer{}
	for _, m := range team.members {
		peers[m.key.PubKey] = authedPeer(t, src, m.name, m.key)
	}
	pub := func(k eventtest.Key, kind int, opts ...eventtest.Option) event.Event {
		t.Helper()
		ev := k.Signed(t, kind, opts...)
		peers[k.PubKey].mustPublish(ev)
		if slices.ContainsFunc(ev.Tags, func(tag event.Tag) bool { return len(tag) > 1 && tag[0] == "h" && tag[1] == team.secret }) {
			team.secretIDs[ev.ID] = true
		}
		return ev
	}
	reply := func(k eventtest.Key, ch, root, parent, content string, opts ...eventtest.Option) event.Event {
		t.Helper()
		return pub(k, 9, append([]eventtest.Option{eventtest.Channel(ch), eventtest.Content(content),
			eventtest.Tag("e", root, "", "root"), eventtest.Tag("e", parent, "", "reply")}, opts...)...)
	}
	msg := func(k eventtest.Key, ch, content string) event.Event {
		t.Helper()
		return pub(k, 9, eventtest.Channel(ch), eventtest.Content(content))
	}
	del := func(k eventtest.Key, target event.Event) {
		t.Helper()
		pub(k, event.KindDeletion, eventtest.Tag("e", target.ID), eventtest.Tag("k", strconv.Itoa(target.Kind)))
		team.deleted = append(team.deleted, target.ID)
	}

	for _, m := range team.members {
		pub(m.key, event.KindProfile, eventtest.Content(`{"name":"`+m.name+`","about":"`+m.name+` keeps the lighthouse"}`))
	}
	team.general = createChannel(t, peers[alice.PubKey], alice)
	team.random = createChannel(t, peers[bob.PubKey], bob)
	team.forum = createChannel(t, peers[alice.PubKey], alice, eventtest.Tag("channel_type", "forum"))
	team.secret = uuid.NewString()
	pub(alice, 9007, nonce(), eventtest.Channel(team.secret), eventtest.Tag("name", "secret"), private)
	pub(alice, 9000, nonce(), eventtest.Channel(team.secret), eventtest.Tag("p", bob.PubKey))
	pub(alice, 9000, nonce(), eventtest.Channel(team.secret), eventtest.Tag("p", dave.PubKey))
	pub(carol, 9021, nonce(), eventtest.Channel(team.general))

	// The general thread: depths 1 to 3, a broadcast reply, a deleted reply.
	root := msg(alice, team.general, "zebracorn migration plan: kickoff")
	team.root = root.ID
	r1 := reply(bob, team.general, root.ID, root.ID, "sounds good")
	r2 := reply(carol, team.general, root.ID, r1.ID, "zebracorn timing question")
	r3 := reply(alice, team.general, root.ID, r2.ID, "next week")
	rb := reply(bob, team.general, root.ID, root.ID, "everyone: kickoff at ten", eventtest.Tag("broadcast", "1"))
	gone := reply(carol, team.general, root.ID, r1.ID, "wrong thread")
	team.replies = []string{r1.ID, r2.ID, r3.ID, rb.ID, gone.ID}
	del(carol, gone)
	for i, k := range []eventtest.Key{bob, carol, dave, alice, bob, carol} {
		msg(k, team.general, "note "+strconv.Itoa(i)+" about the lighthouse")
	}
	oops := msg(carol, team.general, "zebracorn oops")
	del(carol, oops)
	moderated := msg(dave, team.general, "off topic")
	pub(alice, 9005, eventtest.Channel(team.general), eventtest.Tag("e", moderated.ID))
	team.deleted = append(team.deleted, moderated.ID)
	pub(bob, 40003, eventtest.Channel(team.general), eventtest.Content("sounds great"), eventtest.Tag("e", r1.ID))
	pub(alice, 40003, eventtest.Channel(team.general), eventtest.Content("zebracorn migration plan: kickoff (v2)"),
		eventtest.Tag("e", root.ID))
	for _, k := range []eventtest.Key{carol, bob} {
		pub(k, event.KindReaction, eventtest.Channel(team.general), eventtest.Content("+"), eventtest.Tag("e", root.ID),
			eventtest.Tag("p", alice.PubKey))
	}
	undone := pub(dave, event.KindReaction, eventtest.Channel(team.general), eventtest.Content("🎉"),
		eventtest.Tag("e", r2.ID), eventtest.Tag("p", carol.PubKey))
	del(dave, undone)
	pub(alice, 9002, nonce(), eventtest.Channel(team.general), eventtest.Tag("topic", "plans"))

	msg(bob, team.random, "random chatter")
	msg(carol, team.random, "cats of the lighthouse")

	post := pub(alice, 45001, eventtest.Channel(team.forum), eventtest.Content("lighthouse design review"))
	team.forumPost = post.ID
	comment := func(k eventtest.Key, content string) {
		pub(k, 45003, eventtest.Channel(team.forum), eventtest.Content(content),
			eventtest.Tag("e", post.ID, "", "root"), eventtest.Tag("e", post.ID, "", "reply"))
	}
	comment(bob, "looks solid")
	comment(carol, "what about the lens")
	pub(carol, 45002, eventtest.Channel(team.forum), eventtest.Content("+"), eventtest.Tag("e", post.ID))

	// The private thread; dave takes part, then is removed.
	sroot := msg(alice, team.secret, "zebracorn secret budget")
	team.secretRoot = sroot.ID
	s1 := reply(bob, team.secret, sroot.ID, sroot.ID, "we can afford it")
	s2 := reply(dave, team.secret, sroot.ID, s1.ID, "zebracorn costs more")
	reply(alice, team.secret, sroot.ID, s2.ID, "noted")
	pub(bob, 40003, eventtest.Channel(team.secret), eventtest.Content("we can afford it, barely"), eventtest.Tag("e", s1.ID))
	pub(alice, event.KindReaction, eventtest.Channel(team.secret), eventtest.Content("+"), eventtest.Tag("e", s1.ID),
		eventtest.Tag("p", bob.PubKey))
	pub(alice, 9001, nonce(), eventtest.Channel(team.secret), eventtest.Tag("p", dave.PubKey))
	msg(bob, team.secret, "dave has left")

	// Read state: a marker per open stream channel for each member, each
	// written twice (the first version superseded, so not exported).
	now := time.Now().Unix()
	for i, m := range team.members {
		for j, ch := range []string{team.general, team.random} {
			slot := "read-state:" + hex.EncodeToString([]byte(ch[:16]))
			for v := range 2 {
				pub(m.key, event.KindAppData, eventtest.Tag("d", slot), eventtest.Tag("t", "read-state"),
					eventtest.At(now-int64(20-10*v+i+j)), eventtest.Content("nip44-"+m.name+"-"+strconv.Itoa(v)))
			}
		}
	}
	pub(alice, event.KindAppData, eventtest.Tag("d", "app:settings"), eventtest.Content(`{"theme":"dark"}`))
	require.NotEmpty(t, team.secretIDs)
	return team
}

// normal is ev in the drill's normal form (the comment at the top of the
// file): a client-signed event as it was signed, a relay-signed one, which
// must verify against s's key, as its kind, tags and content.
func (s drillSide) normal(t *testing.T, ev event.Event) string {
	t.Helper()
	if ev.PubKey != s.relayPub {
		return string(ev.AppendJSON(nil))
	}
	_, ok := ev.CheckID()
	require.True(t, ok && ev.VerifySignature(), "%s: relay-signed kind %d does not verify", s.name, ev.Kind)
	b, err := json.Marshal(map[string]any{"kind": ev.Kind, "tags": ev.Tags, "content": ev.Content})
	require.NoError(t, err)
	return "relay-signed " + strings.ReplaceAll(string(b), s.relayPub, "<relay>")
}

// normals is an answer in normal form: its client-signed events in the
// order they were sent, then its relay-signed ones sorted. Their place
// among the events of one second is decided by their ids, which differ
// by design, so they are compared as a set.
func (s drillSide) normals(t *testing.T, evs []event.Event) []string {
	t.Helper()
	var signed, relay []string
	for _, ev := range evs {
		if ev.PubKey == s.relayPub {
			relay = append(relay, s.normal(t, ev))
		} else {
			signed = append(signed, s.normal(t, ev))
		}
	}
	slices.Sort(relay)
	return append(signed, relay...)
}

// query sends filters to s's POST /query as key, with a NIP-98 token for
// s's host, and returns the status and body.
func (s drillSide) query(t *testing.T, key eventtest.Key, filters ...any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(filters)
	require.NoError(t, err)
	token, err := client.NIP98Header(key.SK, http.MethodPost, "http://"+s.host+"/query", body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://"+s.p.AppAddr+"/query", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Host = s.host
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", token)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// queryEvents is query that requires 200 and a JSON array of events.
func (s drillSide) queryEvents(t *testing.T, key eventtest.Key, filters ...any) []event.Event {
	t.Helper()
	code, body := s.query(t, key, filters...)
	require.Equal(t, http.StatusOK, code, "%s: %s", s.name, body)
	var raw []json.RawMessage
	require.NoError(t, json.Unmarshal(body, &raw), "%s", body)
	evs := make([]event.Event, 0, len(raw))
	for _, r := range raw {
		ev, err := event.Parse(r)
		require.NoError(t, err, "%s", r)
		evs = append(evs, ev)
	}
	return evs
}

// twBinding is the binding of a thread window (docs/NIP-CW.md §5.5) of f
// read by reader on host; f sets limit, kinds and include_aux, and no
// depth_limit.
func twBinding(t *testing.T, host, reader string, f map[string]any) string {
	t.Helper()
	var cursor any
	if until, ok := f["until"]; ok {
		cursor = []any{until, f["before_id"]}
	}
	b, err := json.Marshal([]any{"tw", 1, "older", host, reader, f["#h"].([]string)[0], f["#e"].([]string)[0],
		f["limit"], 100, f["kinds"], cursor, f["include_aux"]})
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// window reads every page of the channel or thread window f as key, from
// the head to has_more false, and returns the pages in normal form; a
// window that is not served is one empty page. A thread window's bounds
// must carry the binding of s's host and key.
func (s drillSide) window(t *testing.T, key eventtest.Key, f map[string]any) [][]string {
	t.Helper()
	f = maps.Clone(f)
	var pages [][]string
	for range 20 {
		evs := s.queryEvents(t, key, f)
		if len(evs) == 0 {
			return append(pages, nil)
		}
		bounds := evs[len(evs)-1]
		require.Contains(t, []int{39006, 39007}, bounds.Kind, "%s: the window ends with its bounds", s.name)
		page := s.normals(t, evs)
		if bounds.Kind == 39007 {
			want := "tw:1:" + twBinding(t, s.host, key.PubKey, f)
			require.Equal(t, want, bounds.Tags[0][1], "%s: the binding of this host and reader", s.name)
			for i := range page {
				page[i] = strings.Replace(page[i], want, "tw:1:<binding>", 1)
			}
		}
		pages = append(pages, page)
		var b struct {
			HasMore    bool `json:"has_more"`
			NextCursor *struct {
				CreatedAt int64  `json:"created_at"`
				ID        string `json:"id"`
			} `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal([]byte(bounds.Content), &b), bounds.Content)
		if !b.HasMore {
			return pages
		}
		f["until"], f["before_id"] = b.NextCursor.CreatedAt, b.NextCursor.ID
	}
	t.Fatalf("%s: a window of more than 20 pages", s.name)
	return nil
}

// snapshot is the reader's read-state snapshot (docs/PROTOCOL.md §14.6):
// its id and its events in normal form.
func (s drillSide) snapshot(t *testing.T, key eventtest.Key) (string, []string) {
	t.Helper()
	code, body := s.query(t, key, map[string]any{"kinds": []int{event.KindAppData}, "authors": []string{key.PubKey},
		"read_state_snapshot": 1})
	require.Equal(t, http.StatusOK, code, "%s: %s", s.name, body)
	var snap struct {
		Complete   bool              `json:"complete"`
		SnapshotID string            `json:"snapshot_id"`
		Events     []json.RawMessage `json:"events"`
	}
	require.NoError(t, json.Unmarshal(body, &snap), "%s", body)
	require.True(t, snap.Complete)
	var out []string
	for _, r := range snap.Events {
		ev, err := event.Parse(r)
		require.NoError(t, err)
		out = append(out, s.normal(t, ev))
	}
	return snap.SnapshotID, out
}

// TestRestoreDrill is the restore drill of docs/OPERATIONS.md "Backups and
// moving a team".
func TestRestoreDrill(t *testing.T) {
	t.Parallel()
	const restored = "restored.test"
	srcEnv, dstEnv := externalEnv(t), externalEnv(t)
	srcKey, dstKey := event.GenerateKey(), event.GenerateKey()
	srcEnv["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(srcKey)
	dstEnv["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(dstKey)
	require.Equal(t, 0, runBinary(t, dstEnv, "community", "add", "--host", restored).Code)
	srcProc, dstProc := startRelay(t, srcEnv), startRelay(t, dstEnv)
	srcProc.waitReady()
	dstProc.waitReady()
	src := drillSide{name: "source", p: srcProc, host: deploymentHost, relayPub: event.PubKey(srcKey)}
	dst := drillSide{name: "restored", p: dstProc, host: restored, relayPub: event.PubKey(dstKey)}

	team := publishDrillTeam(t, srcProc)
	written := time.Now().Unix()

	// Export once the source's chain head covers everything, so the file
	// carries a checkpoint; import it into the fresh relay's database.
	var f exportFile
	deadline := time.Now().Add(20 * time.Second)
	for {
		f = parseExport(t, runExport(t, srcEnv, "--host", deploymentHost).Stdout)
		if f.header.Audit != nil && f.header.AuditPending == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no chained head: %v", f.raw)
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	file := filepath.Join(t.TempDir(), "team.jsonl.gz")
	runExport(t, srcEnv, "--host", deploymentHost, "--output", file, "--quiet")
	exported := gunzipExport(t, file)
	relaySigned := int64(len(exported.events) - len(clientLines(exported, src.relayPub)))
	// The import runs in a later second than every write, as any real move
	// does, so state kept at the time of the write rather than of the event
	// cannot look the same on both relays by chance.
	for time.Now().Unix() <= written {
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	s := runImport(t, dstEnv, "--host", restored, "--file", file)
	require.Empty(t, s.Refused, "nothing refused: %v", s.FirstRefused)
	require.Equal(t, exported.header.Events-relaySigned, s.Imported, "%+v", s)
	require.Equal(t, relaySigned, s.SkippedRelaySigned)
	again := parseExport(t, runExport(t, dstEnv, "--host", restored).Stdout)
	require.Equal(t, clientLines(exported, src.relayPub), clientLines(again, dst.relayPub), "the same signed events")
	require.Equal(t, exported.header.Deleted, again.header.Deleted, "deleted again")

	// The kinds the drill published that no read gate holds, for REQs
	// that would otherwise have no kinds.
	kinds := []int{0, 5, 7, 9, 40003, 45001, 45002, 45003, 9000, 9001, 9002, 9005, 9007, 9021, event.KindAppData}
	seen := map[string]map[string]bool{} // member → ids of the client-signed events it was answered
	note := func(name string, evs []event.Event) {
		if seen[name] == nil {
			seen[name] = map[string]bool{}
		}
		for _, ev := range evs {
			seen[name][ev.ID] = true
		}
	}
	for _, m := range team.members {
		t.Run(m.name, func(t *testing.T) {
			a := authedPeer(t, srcProc, m.name+"@source", m.key)
			b := dialPeerHost(t, dstProc, m.name+"@restored", restored)
			b.auth(m.key)
			answers, compared := 0, 0 // the figures logged at the end
			// same runs one REQ on both relays and requires the same answer,
			// non-empty when nonEmpty.
			same := func(what string, nonEmpty bool, filters ...any) ([]event.Event, string) {
				t.Helper()
				ha, ca := a.req("drill", filters...)
				hb, cb := b.req("drill", filters...)
				require.Equal(t, ca, cb, "%s: CLOSED", what)
				require.Equal(t, src.normals(t, ha), dst.normals(t, hb), "%s", what)
				if nonEmpty {
					require.NotEmpty(t, ha, "%s", what)
				}
				note(m.name, ha)
				note(m.name, hb)
				answers, compared = answers+1, compared+len(ha)
				return ha, ca
			}
			for _, ch := range []string{team.general, team.random, team.forum} {
				same("history of "+ch, true, map[string]any{"#h": []string{ch}, "kinds": kinds})
			}
			_, closed := same("private history", m.private, map[string]any{"#h": []string{team.secret}, "kinds": kinds})
			if !m.private {
				require.Equal(t, wire.MsgNotChannelMember, closed)
			}
			for _, k := range kinds {
				same("kind "+strconv.Itoa(k), (k != 9000 && k != 9001) || m.private, map[string]any{"kinds": []int{k}})
			}
			for _, other := range team.members {
				same("author "+other.name, true, map[string]any{"authors": []string{other.key.PubKey}, "kinds": kinds})
			}
			same("general thread", true, map[string]any{"#e": []string{team.root}, "kinds": kinds})
			same("private thread", m.private, map[string]any{"#e": []string{team.secretRoot}, "kinds": kinds})
			same("forum thread", true, map[string]any{"#e": []string{team.forumPost}, "kinds": kinds})
			same("channel state", true, map[string]any{"kinds": []int{39000, 39001, 39002}})
			same("membership notices", m.name == "bob" || m.name == "dave",
				map[string]any{"kinds": []int{44100, 44101}, "#p": []string{m.key.PubKey}})
			same("read state", true, map[string]any{"kinds": []int{event.KindAppData}, "authors": []string{m.key.PubKey},
				"#t": []string{"read-state"}})
			gone, _ := same("deleted", false, map[string]any{"ids": team.deleted})
			require.Empty(t, gone, "deleted events stay deleted")

			// Search (docs/PROTOCOL.md §12).
			found, _ := same("search zebracorn", true, map[string]any{"search": "zebracorn"})
			require.Equal(t, m.private, slices.ContainsFunc(found, func(ev event.Event) bool { return team.secretIDs[ev.ID] }),
				"private hits only for the private channel's members")
			same("search lighthouse", true, map[string]any{"search": "lighthouse"})
			same("search kickoff in general", true, map[string]any{"search": "kickoff", "kinds": []int{9}, "#h": []string{team.general}})

			// Windows (docs/NIP-CW.md §3, §4, §5), every page.
			// A served window ends each page with its bounds; one that is
			// not served is a single empty page.
			win := func(what string, served bool, f map[string]any) {
				t.Helper()
				pa, pb := src.window(t, m.key, f), dst.window(t, m.key, f)
				require.Equal(t, pa, pb, "%s", what)
				require.Equal(t, served, len(pa[0]) > 0, "%s: served", what)
				rows := 0
				for _, page := range pa {
					for _, ev := range page {
						if !strings.HasPrefix(ev, "relay-signed ") {
							rows++
						}
					}
				}
				require.Equal(t, served, rows > 0, "%s: rows", what)
				answers, compared = answers+len(pa), compared+rows
			}
			channel := func(ch string, k int) map[string]any {
				return map[string]any{"top_level": true, "#h": []string{ch}, "kinds": []int{k}, "limit": 3,
					"include_aux": true, "include_summaries": true}
			}
			thread := func(ch, root string, k int) map[string]any {
				return map[string]any{"thread_window": true, "#h": []string{ch}, "#e": []string{root}, "kinds": []int{k},
					"limit": 2, "include_aux": true}
			}
			win("general channel window", true, channel(team.general, 9))
			win("forum channel window", true, channel(team.forum, 45001))
			win("private channel window", m.private, channel(team.secret, 9))
			win("general thread window", true, thread(team.general, team.root, 9))
			win("forum thread window", true, thread(team.forum, team.forumPost, 45003))
			win("private thread window", m.private, thread(team.secret, team.secretRoot, 9))
			roots := map[string]any{"resolve_thread_roots": true, "#h": []string{team.general}, "kinds": []int{39005},
				"ids": team.replies}
			ra, rb := src.queryEvents(t, m.key, roots), dst.queryEvents(t, m.key, roots)
			require.Equal(t, src.normals(t, ra), dst.normals(t, rb), "summary recovery")
			require.Len(t, ra, 1, "one root")

			// The read-state snapshot (docs/PROTOCOL.md §14.6).
			ida, sa := src.snapshot(t, m.key)
			idb, sb := dst.snapshot(t, m.key)
			require.Equal(t, sa, sb, "read-state snapshot")
			require.Len(t, sa, 2, "two markers")
			require.Equal(t, ida, idb, "snapshot_id")
			answers, compared = answers+2, compared+len(ra)+len(sa)

			private := 0
			for id := range seen[m.name] {
				if team.secretIDs[id] {
					private++
				}
			}
			if m.private {
				require.Positive(t, private, "the private channel's events were compared")
			} else {
				require.Zero(t, private, "%s is not in the private channel and was answered some of its events", m.name)
			}
			t.Logf("%s: %d answers of each relay equal, %d events in the source's, %d of the private channel's seen",
				m.name, answers, compared, private)
		})
	}

	t.Run("AuditVerify", func(t *testing.T) {
		pool, err := pgxpool.New(context.Background(), dstEnv["DATABASE_URL"])
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
			require.True(t, time.Now().Before(deadline), "no community_imported entry chained: %v", err)
			time.Sleep(100 * time.Millisecond) // polling interval
		}
		require.Equal(t, deploymentHost, detail["source_host"])
		require.Equal(t, exported.trailer.SHA256, detail["sha256"])
		require.Equal(t, exported.header.Audit.Hash, detail["audit_hash"])
		res := runBinary(t, dstEnv, "audit", "verify", "--community", restored)
		require.Equal(t, 0, res.Code, "%s%s", res.Stdout, res.Stderr)
	})
}
