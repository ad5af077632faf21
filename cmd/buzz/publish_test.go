package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

func TestBuildEvent(t *testing.T) {
	t.Parallel()
	sk := event.GenerateKey()
	other := event.GenerateKey()
	now := time.Unix(1_700_000_000, 0)
	presigned := event.Event{CreatedAt: 5, Kind: 7, Content: "+", Tags: event.Tags{{"e", strings.Repeat("a", 64)}}}
	require.NoError(t, presigned.Sign(other))

	tests := []struct {
		name    string
		flags   publishArgs
		stdin   string
		check   func(t *testing.T, ev event.Event)
		wantErr bool
	}{
		{
			name:  "Defaults",
			flags: publishArgs{set: map[string]bool{}},
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, 1, ev.Kind)
				require.Equal(t, now.Unix(), ev.CreatedAt)
				require.Empty(t, ev.Tags)
			},
		},
		{
			name:  "FromFlags",
			flags: publishArgs{kind: 9, content: "hi", tags: tagFlags{{"h", "c1"}, {"e", "x", "", "root"}}, set: map[string]bool{"kind": true, "content": true, "tag": true}},
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, 9, ev.Kind)
				require.Equal(t, "hi", ev.Content)
				require.Equal(t, event.Tags{{"h", "c1"}, {"e", "x", "", "root"}}, ev.Tags)
			},
		},
		{
			name:  "PartialStdin",
			flags: publishArgs{set: map[string]bool{}},
			stdin: `{"kind":9,"content":"from stdin","tags":[["h","c2"]]}`,
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, 9, ev.Kind)
				require.Equal(t, "from stdin", ev.Content)
				require.Equal(t, now.Unix(), ev.CreatedAt)
				require.Equal(t, event.Tags{{"h", "c2"}}, ev.Tags)
			},
		},
		{
			name:  "FlagsOverrideStdin",
			flags: publishArgs{content: "flag", tags: tagFlags{{"p", "x"}}, set: map[string]bool{"content": true, "tag": true}},
			stdin: `{"kind":9,"content":"stdin","created_at":42,"tags":[["h","c2"]]}`,
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, "flag", ev.Content)
				require.EqualValues(t, 42, ev.CreatedAt)
				require.Equal(t, event.Tags{{"h", "c2"}, {"p", "x"}}, ev.Tags)
			},
		},
		{
			name:  "PresignedKept",
			flags: publishArgs{set: map[string]bool{}},
			stdin: string(presigned.AppendJSON(nil)),
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, presigned, ev)
			},
		},
		{name: "ForeignPubkey", flags: publishArgs{set: map[string]bool{}}, stdin: `{"pubkey":"` + event.PubKey(other) + `"}`, wantErr: true},
		{name: "NotJSON", flags: publishArgs{set: map[string]bool{}}, stdin: `nope`, wantErr: true},
		{name: "KindOutOfRange", flags: publishArgs{kind: 70000, set: map[string]bool{"kind": true}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdin *strings.Reader
			if tt.stdin != "" {
				stdin = strings.NewReader(tt.stdin)
			}
			var ev event.Event
			var err error
			if stdin != nil {
				ev, err = buildEvent(tt.flags, stdin, sk, now)
			} else {
				ev, err = buildEvent(tt.flags, nil, sk, now)
			}
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			_, idOK := ev.CheckID()
			require.True(t, idOK)
			require.True(t, ev.VerifySignature())
			tt.check(t, ev)
		})
	}
}

func TestPublishArgs(t *testing.T) {
	t.Parallel()
	o := &publishArgs{a: testApp()}
	require.NoError(t, parseArgs(o, "--kind", "9", "--tag", "h,c1", "--tag", "e,x,,root", "-"))
	require.Equal(t, map[string]bool{"kind": true, "tag": true}, o.set, "only the event's flags count")
	require.Equal(t, tagFlags{{"h", "c1"}, {"e", "x", "", "root"}}, o.tags)
	require.NotNil(t, o.stdin, `"-" reads stdin`)

	o = &publishArgs{a: testApp()}
	require.NoError(t, parseArgs(o, "--content", "hi"))
	require.Nil(t, o.stdin)
	for _, args := range [][]string{{"extra"}, {"--tag", ""}, {"--kind", "x"}, {"-", "-"}} {
		requireUsage(t, parseArgs(&publishArgs{a: testApp()}, args...))
	}
}
