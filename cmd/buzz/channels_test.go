package main

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

func TestChannelCreateArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		id      string // "" = must be a fresh UUID
		tags    event.Tags
		wantErr bool
	}{
		{
			name: "Defaults",
			args: []string{"--name", "general"},
			tags: event.Tags{{"name", "general"}, {"visibility", "open"}, {"channel_type", "stream"}, {"h", "*"}},
		},
		{
			name: "AllFlags",
			args: []string{"--name", "design", "--private", "--forum", "--about", "pixels", "--id", strings.ToUpper(testChannel)},
			id:   testChannel,
			tags: event.Tags{{"name", "design"}, {"visibility", "private"}, {"channel_type", "forum"}, {"about", "pixels"}, {"h", testChannel}},
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
			o := &channelCreateArgs{}
			err := parseArgs(o, tt.args...)
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
		})
	}

	t.Run("FreshIDs", func(t *testing.T) {
		t.Parallel()
		a, b := &channelCreateArgs{}, &channelCreateArgs{}
		require.NoError(t, parseArgs(a, "--name", "x"))
		require.NoError(t, parseArgs(b, "--name", "x"))
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
			o := &memberArgs{cmd: tt.cmd, kind: tt.kind}
			err := parseArgs(o, tt.args...)
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

func TestNewestChannels(t *testing.T) {
	t.Parallel()
	meta := func(id, name string, at int64) event.Event {
		return event.Event{Kind: kindGroupMetadata, CreatedAt: at, Tags: event.Tags{{"d", id}, {"name", name}}}
	}
	got := newestChannels([]event.Event{
		meta(testChannel, "old name", 1), meta(testID, "Beta", 5), meta(testChannel, "alpha", 2),
		meta(testID2, "beta", 1), {Kind: 39002, Tags: event.Tags{{"d", testPubkey}}},
	})
	var names []string
	for _, c := range got {
		names = append(names, c.Name+" "+c.ChannelID[:2])
	}
	require.Equal(t, []string{"alpha 0b", "Beta aa", "beta bb"}, names, "the newest 39000 per channel, by name then id")
}
