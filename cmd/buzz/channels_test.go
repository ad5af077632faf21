package main

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const (
	testChannel = "0b9c5a52-3f8e-4d6b-9a51-2c0e7d4f6a11"
	testID      = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	testID2     = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	testPubkey  = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// testApp is an app whose environment only sets BUZZ_RELAY_URL.
func testApp() *app {
	return &app{getenv: func(k string) string {
		if k == "BUZZ_RELAY_URL" {
			return "ws://env:1"
		}
		return ""
	}, stdin: strings.NewReader(""), stdout: &bytes.Buffer{}}
}

func requireUsage(t *testing.T, err error) {
	t.Helper()
	var ue *usageError
	require.ErrorAs(t, err, &ue)
}

func TestChannelCreateArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		id      string // "" = must be a fresh UUID
		tags    event.Tags
		relay   string
		http    bool
		wantErr bool
	}{
		{
			name: "Defaults",
			args: []string{"--name", "general"},
			tags: event.Tags{{"name", "general"}, {"visibility", "open"}, {"channel_type", "stream"}, {"h", "*"}},
		},
		{
			name:  "AllFlags",
			args:  []string{"--name", "design", "--private", "--forum", "--about", "pixels", "--id", strings.ToUpper(testChannel), "--relay", "wss://r:2", "--http"},
			id:    testChannel,
			tags:  event.Tags{{"name", "design"}, {"visibility", "private"}, {"channel_type", "forum"}, {"about", "pixels"}, {"h", testChannel}},
			relay: "wss://r:2", http: true,
		},
		{name: "MissingName", args: []string{"--private"}, wantErr: true},
		{name: "HashOnlyName", args: []string{"--name", " # "}, wantErr: true},
		{name: "BadID", args: []string{"--name", "x", "--id", "nope"}, wantErr: true},
		{name: "UnhyphenatedID", args: []string{"--name", "x", "--id", strings.ReplaceAll(testChannel, "-", "")}, wantErr: true},
		{name: "Positional", args: []string{"--name", "x", "extra"}, wantErr: true},
		{name: "UnknownFlag", args: []string{"--name", "x", "--nope"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseChannelCreate(testApp(), tt.args)
			if tt.wantErr {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			if tt.id != "" {
				require.Equal(t, tt.id, o.id)
			} else {
				_, err := uuid.Parse(o.id)
				require.NoError(t, err)
				require.Len(t, o.id, 36)
			}
			want := tt.tags
			if want[len(want)-1][1] == "*" {
				want[len(want)-1] = event.Tag{"h", o.id}
			}
			ev := o.event()
			require.Equal(t, kindCreateGroup, ev.Kind)
			require.Equal(t, "", ev.Content)
			require.Equal(t, want, ev.Tags)
			relay := tt.relay
			if relay == "" {
				relay = "ws://env:1"
			}
			require.Equal(t, relay, o.relay)
			require.Equal(t, tt.http, o.http)
		})
	}

	t.Run("FreshIDs", func(t *testing.T) {
		t.Parallel()
		a, err := parseChannelCreate(testApp(), []string{"--name", "x"})
		require.NoError(t, err)
		b, err := parseChannelCreate(testApp(), []string{"--name", "x"})
		require.NoError(t, err)
		require.NotEqual(t, a.id, b.id)
	})
}

func TestMemberArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cmd     string
		kind    int
		args    []string
		tags    event.Tags
		wantErr bool
	}{
		{"Join", "channels join", kindJoinRequest, []string{"--channel", testChannel}, event.Tags{{"h", testChannel}}, false},
		{"Leave", "channels leave", kindLeaveRequest, []string{"--channel", testChannel}, event.Tags{{"h", testChannel}}, false},
		{"Add", "channels add-member", kindPutUser, []string{"--channel", testChannel, "--pubkey", testPubkey},
			event.Tags{{"h", testChannel}, {"p", testPubkey}}, false},
		{"AddWithRole", "channels add-member", kindPutUser, []string{"--pubkey", strings.ToUpper(testPubkey), "--role", "admin", "--channel", testChannel},
			event.Tags{{"h", testChannel}, {"p", testPubkey}, {"role", "admin"}}, false},
		{"Remove", "channels remove-member", kindRemoveUser, []string{"--channel", testChannel, "--pubkey", testPubkey},
			event.Tags{{"h", testChannel}, {"p", testPubkey}}, false},
		{"JoinNoChannel", "channels join", kindJoinRequest, nil, nil, true},
		{"JoinBadChannel", "channels join", kindJoinRequest, []string{"--channel", "general"}, nil, true},
		{"JoinTakesNoPubkey", "channels join", kindJoinRequest, []string{"--channel", testChannel, "--pubkey", testPubkey}, nil, true},
		{"RemoveTakesNoRole", "channels remove-member", kindRemoveUser, []string{"--channel", testChannel, "--pubkey", testPubkey, "--role", "admin"}, nil, true},
		{"AddNoPubkey", "channels add-member", kindPutUser, []string{"--channel", testChannel}, nil, true},
		{"AddShortPubkey", "channels add-member", kindPutUser, []string{"--channel", testChannel, "--pubkey", "abc"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseMember(testApp(), tt.cmd, tt.kind, tt.args)
			if tt.wantErr {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			ev := o.event()
			require.Equal(t, tt.kind, ev.Kind)
			require.Equal(t, tt.tags, ev.Tags)
			require.Equal(t, testChannel, o.fields()["channel_id"])
		})
	}
}

func TestChannelFromMetadata(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   event.Event
		want channelInfo
		ok   bool
	}{
		{
			name: "Open",
			ev:   event.Event{Kind: kindGroupMetadata, Tags: event.Tags{{"d", testChannel}, {"name", "general"}, {"public"}, {"closed"}, {"t", "stream"}}},
			want: channelInfo{ChannelID: testChannel, Name: "general", Visibility: "open", Type: "stream"},
			ok:   true,
		},
		{
			name: "Everything",
			ev: event.Event{Kind: kindGroupMetadata, Tags: event.Tags{{"d", testChannel}, {"name", "design"}, {"about", "pixels"},
				{"private"}, {"closed"}, {"t", "forum"}, {"topic", "q3"}, {"purpose", "p"}, {"archived", "true"}}},
			want: channelInfo{ChannelID: testChannel, Name: "design", Visibility: "private", Type: "forum", About: "pixels", Topic: "q3", Archived: true},
			ok:   true,
		},
		{name: "NoD", ev: event.Event{Kind: kindGroupMetadata, Tags: event.Tags{{"name", "x"}}}, want: channelInfo{Name: "x", Visibility: "open", Type: "stream"}},
		{name: "OtherKind", ev: event.Event{Kind: 39002, Tags: event.Tags{{"d", testChannel}}}, want: channelInfo{ChannelID: testChannel, Visibility: "open", Type: "stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := channelFromMetadata(tt.ev)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestSubcommandDispatch(t *testing.T) {
	t.Parallel()
	noenv := func(string) string { return "" }
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"ChannelsAlone", []string{"channels"}, exitUsage, "", "missing subcommand"},
		{"UnknownSub", []string{"messages", "frob"}, exitUsage, "", `unknown subcommand \"frob\"`},
		{"GroupHelp", []string{"threads", "help"}, exitOK, "get", ""},
		{"SubHelpFlag", []string{"channels", "create", "-h"}, exitOK, "", ""},
		{"UsageBeforeKey", []string{"messages", "send", "--content", "x"}, exitUsage, "", "--channel is required"},
		{"MissingKey", []string{"channels", "list"}, exitUsage, "", "BUZZ_PRIVATE_KEY"},
		{"BadRelay", []string{"threads", "get", "--root", testID, "--channel", testChannel, "--relay", "ftp://x"},
			exitUsage, "", "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := noenv
			if tt.name == "BadRelay" {
				sk := event.GenerateKey()
				env = func(k string) string {
					if k == "BUZZ_PRIVATE_KEY" {
						return hex.EncodeToString(sk)
					}
					return ""
				}
			}
			var out, errb bytes.Buffer
			code := run(t.Context(), tt.args, env, strings.NewReader(""), &out, &errb)
			require.Equal(t, tt.code, code, errb.String())
			require.Contains(t, out.String(), tt.stdout)
			require.Contains(t, errb.String(), tt.stderr)
		})
	}
}
