package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

func TestSendArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		replyTo string
		wantErr bool
	}{
		{"Plain", []string{"--channel", testChannel, "--content", "hi"}, "", false},
		{"Reply", []string{"--content", "hi", "--reply-to", strings.ToUpper(testID), "--channel", strings.ToUpper(testChannel)}, testID, false},
		{"NoChannel", []string{"--content", "hi"}, "", true},
		{"NoContent", []string{"--channel", testChannel}, "", true},
		{"BadReplyTo", []string{"--channel", testChannel, "--content", "hi", "--reply-to", "xyz"}, "", true},
		{"Positional", []string{"--channel", testChannel, "hi"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := &sendArgs{}
			err := parseArgs(o, tt.args...)
			if tt.wantErr {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, testChannel, o.channel)
			require.Equal(t, "hi", o.content)
			require.Equal(t, tt.replyTo, o.replyTo)
		})
	}
}

func TestMessageEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		root, parent string
		tags         event.Tags
	}{
		{"TopLevel", "", "", event.Tags{{"h", testChannel}}},
		{"ReplyToRoot", testID, testID, event.Tags{{"h", testChannel}, {"e", testID, "", "root"}, {"e", testID, "", "reply"}}},
		{"NestedReply", testID, testID2, event.Tags{{"h", testChannel}, {"e", testID, "", "root"}, {"e", testID2, "", "reply"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := messageEvent(testChannel, "hello", tt.root, tt.parent)
			require.Equal(t, kindMessage, ev.Kind)
			require.Equal(t, "hello", ev.Content)
			require.Equal(t, tt.tags, ev.Tags)
		})
	}
}

func TestThreadRoot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tags event.Tags
		want string
	}{
		{"TopLevelIsItsOwnRoot", event.Tags{{"h", testChannel}}, testID},
		{"RootMarker", event.Tags{{"h", testChannel}, {"e", testID2, "", "root"}, {"e", testID2, "", "reply"}}, testID2},
		{"UppercaseRoot", event.Tags{{"e", strings.ToUpper(testID2), "", "root"}}, testID2},
		{"LastRootWins", event.Tags{{"e", testPubkey, "", "root"}, {"e", testID2, "wss://x", "root"}}, testID2},
		{"UnmarkedIgnored", event.Tags{{"e", testID2}, {"e", testID2, ""}}, testID},
		{"ReplyMarkerOnly", event.Tags{{"e", testID2, "", "reply"}}, testID},
		{"InvalidRootIgnored", event.Tags{{"e", "nothex", "", "root"}}, testID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, threadRoot(event.Event{ID: testID, Tags: tt.tags}))
		})
	}
}

func TestListArgs(t *testing.T) {
	t.Parallel()
	i64 := func(n int64) *int64 { return &n }
	rfc := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name         string
		args         []string
		limit        *int
		since, until *int64
		wantErr      bool
	}{
		{name: "ChannelOnly", args: []string{"--channel", testChannel}},
		{name: "Bounds", args: []string{"--channel", testChannel, "--limit", "20", "--since", "100", "--until", rfc.Format(time.RFC3339)},
			limit: func() *int { n := 20; return &n }(), since: i64(100), until: i64(rfc.Unix())},
		{name: "NoChannel", args: []string{"--limit", "5"}, wantErr: true},
		{name: "NegativeLimit", args: []string{"--channel", testChannel, "--limit", "-1"}, wantErr: true},
		{name: "BadSince", args: []string{"--channel", testChannel, "--since", "yesterday"}, wantErr: true},
		{name: "NegativeUntil", args: []string{"--channel", testChannel, "--until", "-5"}, wantErr: true},
		{name: "LimitNotANumber", args: []string{"--channel", testChannel, "--limit", "abc"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := &listArgs{}
			err := parseArgs(o, tt.args...)
			if tt.wantErr {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			f := o.filter()
			require.Equal(t, []int{9, 40002}, f.Kinds)
			require.Equal(t, map[string][]string{"h": {testChannel}}, f.Tags)
			require.Equal(t, tt.limit, f.Limit)
			require.Equal(t, tt.since, f.Since)
			require.Equal(t, tt.until, f.Until)
			require.Nil(t, f.IDs)
			require.Nil(t, f.Authors)
		})
	}
}

func TestTargetArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    int
		args    []string
		build   func(o *targetArgs) event.Event
		want    event.Event
		wantErr bool
	}{
		{
			name: "ReactDefault", kind: kindReaction, args: []string{"--id", testID},
			build: func(o *targetArgs) event.Event { return reactionEvent(o.target, o.emoji) },
			want:  event.Event{Kind: 7, Content: "+", Tags: event.Tags{{"e", testID}}},
		},
		{
			name: "ReactEmoji", kind: kindReaction, args: []string{"--emoji", "🎉", "--id", strings.ToUpper(testID)},
			build: func(o *targetArgs) event.Event { return reactionEvent(o.target, o.emoji) },
			want:  event.Event{Kind: 7, Content: "🎉", Tags: event.Tags{{"e", testID}}},
		},
		{name: "ReactEmptyEmoji", kind: kindReaction, args: []string{"--id", testID, "--emoji", ""}, wantErr: true},
		{name: "ReactNoID", kind: kindReaction, args: nil, wantErr: true},
		{name: "ReactTakesNoChannel", kind: kindReaction, args: []string{"--id", testID, "--channel", testChannel}, wantErr: true},
		{
			name: "Edit", kind: kindMessageEdit, args: []string{"--id", testID, "--channel", testChannel, "--content", "fixed"},
			build: func(o *targetArgs) event.Event { return editEvent(o.target, o.channel, o.content) },
			want:  event.Event{Kind: 40003, Content: "fixed", Tags: event.Tags{{"e", testID}, {"h", testChannel}}},
		},
		{name: "EditNoChannel", kind: kindMessageEdit, args: []string{"--id", testID, "--content", "x"}, wantErr: true},
		{name: "EditNoContent", kind: kindMessageEdit, args: []string{"--id", testID, "--channel", testChannel}, wantErr: true},
		{
			name: "Delete", kind: kindDeletion, args: []string{"--id", testID},
			build: func(o *targetArgs) event.Event { return deletionEvent(o.target) },
			want:  event.Event{Kind: 5, Tags: event.Tags{{"e", testID}}},
		},
		{name: "DeleteBadID", kind: kindDeletion, args: []string{"--id", testID[:63]}, wantErr: true},
		{name: "DeleteTakesNoContent", kind: kindDeletion, args: []string{"--id", testID, "--content", "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := &targetArgs{cmd: "messages x", kind: tt.kind}
			err := parseArgs(o, tt.args...)
			if tt.wantErr {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, tt.build(o))
			require.Equal(t, tt.want, o.event())
		})
	}
}

func TestOldestFirst(t *testing.T) {
	t.Parallel()
	evs := []event.Event{{ID: "c", CreatedAt: 3}, {ID: "b", CreatedAt: 1}, {ID: "a", CreatedAt: 1}, {ID: "d", CreatedAt: 2}}
	oldestFirst(evs)
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	require.Equal(t, []string{"a", "b", "d", "c"}, ids)
}

func ids(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l["id"].(string))
	}
	return out
}

func TestCommandsAgainstRelay(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	alice, bob := newUser(t, r), newUser(t, r)
	bobPub := bob.pubkey()

	// Create an open channel; the printed id is the h the CLI chose.
	created := alice.ok("channels", "create", "--name", "general", "--about", "all hands")
	ch := created["channel_id"].(string)
	require.Len(t, ch, 36)
	require.Len(t, created["event_id"], 64)

	res := bob.run("channels", "list")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, []map[string]any{{"channel_id": ch, "name": "general", "visibility": "open", "type": "stream",
		"about": "all hands", "topic": "", "archived": false}}, res.lines(t))

	bob.ok("channels", "join", "--channel", ch)

	// A root, a reply to it, and a reply to the reply (same thread root).
	root := alice.ok("messages", "send", "--channel", ch, "--content", "root")["event_id"].(string)
	reply1 := bob.ok("messages", "send", "--channel", ch, "--content", "first reply", "--reply-to", root)
	require.Equal(t, root, reply1["root"])
	require.Equal(t, root, reply1["reply_to"])
	r1 := reply1["event_id"].(string)
	reply2 := alice.ok("messages", "send", "--channel", ch, "--content", "nested", "--reply-to", r1, "--http")
	require.Equal(t, root, reply2["root"])
	require.Equal(t, r1, reply2["reply_to"])
	r2 := reply2["event_id"].(string)
	alice.refused("messages send: reply parent "+testID+" not found", "messages", "send", "--channel", ch, "--content", "x", "--reply-to", testID)

	// React (default "+"), twice: the second is a duplicate.
	react := bob.ok("messages", "react", "--id", root)
	require.Equal(t, "+", react["emoji"])
	bob.refused("duplicate:", "messages", "react", "--id", root)
	bob.ok("messages", "react", "--id", root, "--emoji", "🎉", "--http")

	// Edit: the author may, someone else may not.
	alice.ok("messages", "edit", "--id", root, "--channel", ch, "--content", "root, edited")
	bob.refused("must be event author", "messages", "edit", "--id", root, "--channel", ch, "--content", "mine now")

	// List: kinds 9 only (edits are 40003), oldest first; the root shows
	// its edit (TestMessagesListShowsEdit has the rules).
	res = bob.run("messages", "list", "--channel", ch)
	require.Equal(t, exitOK, res.code, res.stderr)
	msgs := res.lines(t)
	require.ElementsMatch(t, []string{root, r1, r2}, ids(msgs))
	for i := 1; i < len(msgs); i++ {
		require.LessOrEqual(t, msgs[i-1]["created_at"].(float64), msgs[i]["created_at"].(float64))
	}
	for _, m := range msgs {
		if m["id"] == root {
			require.Equal(t, "root, edited", m["content"])
		}
	}
	res = bob.run("messages", "list", "--channel", ch, "--limit", "2", "--http")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Len(t, res.lines(t), 2)

	// The thread: the root first, then both replies.
	res = bob.run("threads", "get", "--root", root, "--channel", ch)
	require.Equal(t, exitOK, res.code, res.stderr)
	thread := res.lines(t)
	require.Len(t, thread, 3)
	require.Equal(t, root, thread[0]["id"])
	require.ElementsMatch(t, []string{r1, r2}, ids(thread[1:]))
	for _, l := range thread[1:] {
		tags := l["tags"].([]any)
		require.Contains(t, tags, []any{"e", root, "", "root"})
		require.Contains(t, tags, []any{"h", ch})
	}
	bob.refused("threads get: thread root "+testID+" not found", "threads", "get", "--root", testID, "--channel", ch)

	// Delete: only the author; the deleted reply leaves the thread.
	bob.refused("must be event author", "messages", "delete", "--id", r2)
	alice.ok("messages", "delete", "--id", r2)
	res = alice.run("threads", "get", "--root", root, "--channel", ch, "--http")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, []string{root, r1}, ids(res.lines(t)))

	// A private forum with a chosen id: invisible to bob until added.
	priv := alice.ok("channels", "create", "--name", "design", "--private", "--forum", "--id", testChannel)
	require.Equal(t, testChannel, priv["channel_id"])
	alice.refused("duplicate: channel already exists", "channels", "create", "--name", "again", "--id", testChannel)
	bob.refused("private", "channels", "join", "--channel", testChannel)
	require.Len(t, bob.run("channels", "list").lines(t), 1)
	added := alice.ok("channels", "add-member", "--channel", testChannel, "--pubkey", bobPub, "--role", "member")
	require.Equal(t, bobPub, added["pubkey"])
	chans := bob.run("channels", "list").lines(t)
	require.Len(t, chans, 2)
	require.Equal(t, map[string]any{"channel_id": testChannel, "name": "design", "visibility": "private", "type": "forum",
		"about": "", "topic": "", "archived": false}, chans[0])
	bob.refused("not authorized", "channels", "remove-member", "--channel", testChannel, "--pubkey", alice.pubkey())
	alice.ok("channels", "remove-member", "--channel", testChannel, "--pubkey", bobPub)
	require.Len(t, bob.run("channels", "list").lines(t), 1)

	bob.ok("channels", "leave", "--channel", ch)
	alice.refused("last owner", "channels", "leave", "--channel", ch)
}

func TestNewestEdits(t *testing.T) {
	t.Parallel()
	alice, bob := strings.Repeat("a", 64), strings.Repeat("b", 64)
	id := func(c byte) string { return strings.Repeat(string(c), 64) }
	msg := func(i byte, author string) event.Event {
		return event.Event{ID: id(i), PubKey: author, Kind: kindMessage, Content: "orig"}
	}
	edit := func(i byte, author string, at int64, tags ...event.Tag) event.Event {
		return event.Event{ID: id(i), PubKey: author, Kind: kindMessageEdit, CreatedAt: at, Content: "edit " + string(i), Tags: tags}
	}
	m1, m2, m3 := msg('1', alice), msg('2', bob), msg('3', alice)
	e := func(target string) event.Tag { return event.Tag{"e", target} }
	got := newestEdits([]event.Event{m1, m2, m3}, []event.Event{
		edit('c', alice, 10, e(m1.ID)),
		edit('d', alice, 20, event.Tag{"e", strings.ToUpper(m1.ID)}), // newest for m1
		edit('e', alice, 5, e(m1.ID)),
		edit('f', bob, 30, e(m1.ID)),                                                     // not m1's author: ignored
		edit('7', bob, 40, e(m2.ID), e(m1.ID)),                                           // edits m2; only mentions m1
		edit('9', bob, 40, e(m2.ID)),                                                     // same second: the lower id (7) wins
		edit('8', alice, 50, event.Tag{"e", "nothex"}),                                   // no valid target
		{ID: id('5'), PubKey: alice, Kind: 1, CreatedAt: 60, Tags: event.Tags{e(m3.ID)}}, // not an edit
	})
	require.Equal(t, map[string]string{m1.ID: id('d'), m2.ID: id('7')}, func() map[string]string {
		out := map[string]string{}
		for k, v := range got {
			out[k] = v.ID
		}
		return out
	}())
}

func TestShowEdited(t *testing.T) {
	t.Parallel()
	msg := event.Event{ID: testID, PubKey: testPubkey, CreatedAt: 5, Kind: 9, Tags: event.Tags{{"h", testChannel}}, Content: "a <b> & c", Sig: "s"}
	require.Equal(t, string(msg.AppendJSON(nil)), string(showEdited(msg, event.Event{})), "an unedited message is printed as stored")
	edit := event.Event{ID: testID2, CreatedAt: 9, Content: "new <text>"}
	var got map[string]any
	require.NoError(t, json.Unmarshal(showEdited(msg, edit), &got))
	require.Equal(t, "new <text>", got["content"])
	require.Equal(t, testID, got["id"])
	require.Equal(t, map[string]any{"id": testID2, "created_at": 9.0, "original": "a <b> & c"}, got["edited"])
	require.Contains(t, string(showEdited(msg, edit)), `"original":"a <b> & c"`, "text is not HTML-escaped")
}

// TestMessagesListShowsEdit edits messages in every way the relay accepts
// and lists them: the newest edit by the author gives the text, an edit
// of another message that merely names this one does not, and --raw shows
// what is stored.
func TestMessagesListShowsEdit(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	alice, bob := newUser(t, r), newUser(t, r)
	ch := alice.ok("channels", "create", "--name", "general")["channel_id"].(string)
	bob.ok("channels", "join", "--channel", ch)
	m1 := alice.ok("messages", "send", "--channel", ch, "--content", "first")["event_id"].(string)
	m2 := bob.ok("messages", "send", "--channel", ch, "--content", "bob's")["event_id"].(string)
	m3 := alice.ok("messages", "send", "--channel", ch, "--content", "never edited")["event_id"].(string)

	now := time.Now().Unix()
	rawEdit := func(u cliUser, at int64, content string, targets ...string) string {
		t.Helper()
		args := []string{"publish", "--kind", "40003", "--created-at", strconv.FormatInt(at, 10), "--content", content}
		for _, id := range targets {
			args = append(args, "--tag", "e,"+id)
		}
		res := u.run(append(args, "--tag", "h,"+ch)...)
		require.Equal(t, exitOK, res.code, res.stderr)
		return res.lines(t)[0]["id"].(string)
	}
	alice.ok("messages", "edit", "--id", m1, "--channel", ch, "--content", "first, edited")
	rawEdit(alice, now-60, "an older edit", m1)
	tieA, tieB := rawEdit(alice, now+60, "tie A", m1), rawEdit(alice, now+60, "tie B", m1)
	winner, winnerText := tieA, "tie A"
	if tieB < tieA {
		winner, winnerText = tieB, "tie B"
	}
	bobEdit := rawEdit(bob, now, "bob, edited", m2, m1) // edits m2; its second e tag names m1
	bob.refused("invalid: must be event author to edit", "messages", "edit", "--id", m1, "--channel", ch, "--content", "mine now")

	res := bob.run("messages", "list", "--channel", ch)
	require.Equal(t, exitOK, res.code, res.stderr)
	byID := map[string]map[string]any{}
	for _, l := range res.lines(t) {
		byID[l["id"].(string)] = l
	}
	require.Len(t, byID, 3)
	require.Equal(t, winnerText, byID[m1]["content"])
	require.Equal(t, map[string]any{"id": winner, "created_at": float64(now + 60), "original": "first"}, byID[m1]["edited"])
	require.Equal(t, "bob, edited", byID[m2]["content"])
	require.Equal(t, map[string]any{"id": bobEdit, "created_at": float64(now), "original": "bob's"}, byID[m2]["edited"])
	require.Equal(t, "never edited", byID[m3]["content"])
	require.NotContains(t, byID[m3], "edited")

	res = bob.run("messages", "list", "--channel", ch, "--get", "content", "--http")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.ElementsMatch(t, []string{winnerText, "bob, edited", "never edited"}, strings.Split(strings.TrimSpace(res.stdout), "\n"))

	res = bob.run("messages", "list", "--channel", ch, "--raw")
	require.Equal(t, exitOK, res.code, res.stderr)
	raw := res.lines(t)
	require.Len(t, raw, 3)
	for _, l := range raw {
		require.NotContains(t, l, "edited")
		ev, err := event.Parse([]byte(mustJSON(t, l)))
		require.NoError(t, err)
		require.True(t, ev.VerifySignature(), "--raw prints the signed events")
	}
	require.ElementsMatch(t, []string{"first", "bob's", "never edited"}, []string{
		raw[0]["content"].(string), raw[1]["content"].(string), raw[2]["content"].(string)})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
