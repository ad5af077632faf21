package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
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
			o, err := parseSend(testApp(), tt.args)
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseList(testApp(), tt.args)
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
			o, err := parseTarget(testApp(), "messages x", tt.kind, tt.args)
			if tt.wantErr {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, tt.build(o))
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

// cliUser runs buzz command lines as one key against one relay.
type cliUser struct {
	t     *testing.T
	relay string
	sk    string
}

// run executes args and returns the exit status, the stdout lines decoded
// as JSON objects, and stderr.
func (u cliUser) run(args ...string) (int, []map[string]any, string) {
	u.t.Helper()
	env := func(k string) string {
		switch k {
		case "BUZZ_PRIVATE_KEY":
			return u.sk
		case "BUZZ_RELAY_URL":
			return u.relay
		}
		return ""
	}
	var out, errb bytes.Buffer
	code := run(u.t.Context(), args, env, strings.NewReader(""), &out, &errb)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(u.t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	return code, lines, errb.String()
}

// ok runs args, requires exit 0 and one accepted result line, and returns it.
func (u cliUser) ok(args ...string) map[string]any {
	u.t.Helper()
	code, lines, stderr := u.run(args...)
	require.Equal(u.t, exitOK, code, "%v: %s", args, stderr)
	require.Len(u.t, lines, 1)
	require.Equal(u.t, true, lines[0]["accepted"], lines[0])
	return lines[0]
}

// refused runs args and requires exit 1 with message or error containing want.
func (u cliUser) refused(want string, args ...string) {
	u.t.Helper()
	code, lines, stderr := u.run(args...)
	require.Equal(u.t, exitRefused, code, "%v: %v %s", args, lines, stderr)
	got := stderr
	if len(lines) == 1 {
		require.Equal(u.t, false, lines[0]["accepted"])
		got = lines[0]["message"].(string)
	}
	require.Contains(u.t, got, want)
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
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	r := relaytest.Start(t, nil)
	relay := "ws://" + r.Host
	aliceSK, bobSK := event.GenerateKey(), event.GenerateKey()
	alice := cliUser{t: t, relay: relay, sk: hex.EncodeToString(aliceSK)}
	bob := cliUser{t: t, relay: relay, sk: hex.EncodeToString(bobSK)}
	bobPub := event.PubKey(bobSK)

	// Create an open channel; the printed id is the h the CLI chose.
	created := alice.ok("channels", "create", "--name", "general", "--about", "all hands")
	ch := created["channel_id"].(string)
	require.Len(t, ch, 36)
	require.Len(t, created["event_id"], 64)

	code, chans, stderr := bob.run("channels", "list")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, []map[string]any{{"channel_id": ch, "name": "general", "visibility": "open", "type": "stream",
		"about": "all hands", "topic": "", "archived": false}}, chans)

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
	alice.refused("reply parent", "messages", "send", "--channel", ch, "--content", "x", "--reply-to", testID)

	// React (default "+"), twice: the second is a duplicate.
	react := bob.ok("messages", "react", "--id", root)
	require.Equal(t, "+", react["emoji"])
	bob.refused("duplicate:", "messages", "react", "--id", root)
	bob.ok("messages", "react", "--id", root, "--emoji", "🎉", "--http")

	// Edit: the author may, someone else may not.
	alice.ok("messages", "edit", "--id", root, "--channel", ch, "--content", "root, edited")
	bob.refused("must be event author", "messages", "edit", "--id", root, "--channel", ch, "--content", "mine now")

	// List: kinds 9 only here (edits are 40003), oldest first.
	code, msgs, stderr := bob.run("messages", "list", "--channel", ch)
	require.Equal(t, exitOK, code, stderr)
	require.ElementsMatch(t, []string{root, r1, r2}, ids(msgs))
	for i := 1; i < len(msgs); i++ {
		require.LessOrEqual(t, msgs[i-1]["created_at"].(float64), msgs[i]["created_at"].(float64))
	}
	code, msgs, stderr = bob.run("messages", "list", "--channel", ch, "--limit", "2", "--http")
	require.Equal(t, exitOK, code, stderr)
	require.Len(t, msgs, 2)

	// The thread: the root first, then both replies.
	code, thread, stderr := bob.run("threads", "get", "--root", root, "--channel", ch)
	require.Equal(t, exitOK, code, stderr)
	require.Len(t, thread, 3)
	require.Equal(t, root, thread[0]["id"])
	require.ElementsMatch(t, []string{r1, r2}, ids(thread[1:]))
	for _, l := range thread[1:] {
		tags := l["tags"].([]any)
		require.Contains(t, tags, []any{"e", root, "", "root"})
		require.Contains(t, tags, []any{"h", ch})
	}
	code, _, stderr = bob.run("threads", "get", "--root", testID, "--channel", ch)
	require.Equal(t, exitRefused, code)
	require.Contains(t, stderr, "not found")

	// Delete: only the author; the deleted reply leaves the thread.
	bob.refused("must be event author", "messages", "delete", "--id", r2)
	alice.ok("messages", "delete", "--id", r2)
	code, thread, stderr = alice.run("threads", "get", "--root", root, "--channel", ch, "--http")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, []string{root, r1}, ids(thread))

	// A private forum with a chosen id: invisible to bob until added.
	priv := alice.ok("channels", "create", "--name", "design", "--private", "--forum", "--id", testChannel)
	require.Equal(t, testChannel, priv["channel_id"])
	alice.refused("duplicate: channel already exists", "channels", "create", "--name", "again", "--id", testChannel)
	bob.refused("private", "channels", "join", "--channel", testChannel)
	_, chans, _ = bob.run("channels", "list")
	require.Len(t, chans, 1)
	added := alice.ok("channels", "add-member", "--channel", testChannel, "--pubkey", bobPub, "--role", "member")
	require.Equal(t, bobPub, added["pubkey"])
	_, chans, _ = bob.run("channels", "list")
	require.Len(t, chans, 2)
	require.Equal(t, map[string]any{"channel_id": testChannel, "name": "design", "visibility": "private", "type": "forum",
		"about": "", "topic": "", "archived": false}, chans[0])
	bob.refused("not authorized", "channels", "remove-member", "--channel", testChannel, "--pubkey", event.PubKey(aliceSK))
	alice.ok("channels", "remove-member", "--channel", testChannel, "--pubkey", bobPub)
	_, chans, _ = bob.run("channels", "list")
	require.Len(t, chans, 1)

	bob.ok("channels", "leave", "--channel", ch)
	alice.refused("last owner", "channels", "leave", "--channel", ch)
}
