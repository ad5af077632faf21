package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		relay   string
		http    bool
		pos     []string
		wantErr bool
	}{
		{"Defaults", nil, "ws://env:1", false, nil, false},
		{"FlagsAfterArgs", []string{`{"kinds":[9]}`, "--relay", "ws://x:1", "--http"}, "ws://x:1", true, []string{`{"kinds":[9]}`}, false},
		{"DashIsPositional", []string{"--http", "-"}, "ws://env:1", true, []string{"-"}, false},
		{"DoubleDash", []string{"--", "--http"}, "ws://env:1", false, []string{"--http"}, false},
		{"UnknownFlag", []string{"--nope"}, "", false, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := newFlagSet("query")
			var c common
			c.register(fs, func(k string) string {
				if k == "BUZZ_RELAY_URL" {
					return "ws://env:1"
				}
				return ""
			})
			pos, err := parseFlags(fs, tt.args)
			if tt.wantErr {
				var ue *usageError
				require.ErrorAs(t, err, &ue)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.pos, pos)
			require.Equal(t, tt.relay, c.relay)
			require.Equal(t, tt.http, c.http)
		})
	}
}

func TestBuildEvent(t *testing.T) {
	t.Parallel()
	sk := event.GenerateKey()
	other := event.GenerateKey()
	now := time.Unix(1_700_000_000, 0)
	presigned := event.Event{CreatedAt: 5, Kind: 7, Content: "+", Tags: event.Tags{{"e", strings.Repeat("a", 64)}}}
	require.NoError(t, presigned.Sign(other))

	tests := []struct {
		name    string
		flags   publishFlags
		stdin   string
		check   func(t *testing.T, ev event.Event)
		wantErr bool
	}{
		{
			name:  "Defaults",
			flags: publishFlags{set: map[string]bool{}},
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, 1, ev.Kind)
				require.Equal(t, now.Unix(), ev.CreatedAt)
				require.Empty(t, ev.Tags)
			},
		},
		{
			name:  "FromFlags",
			flags: publishFlags{kind: 9, content: "hi", tags: tagFlags{{"h", "c1"}, {"e", "x", "", "root"}}, set: map[string]bool{"kind": true, "content": true, "tag": true}},
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, 9, ev.Kind)
				require.Equal(t, "hi", ev.Content)
				require.Equal(t, event.Tags{{"h", "c1"}, {"e", "x", "", "root"}}, ev.Tags)
			},
		},
		{
			name:  "PartialStdin",
			flags: publishFlags{set: map[string]bool{}},
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
			flags: publishFlags{content: "flag", tags: tagFlags{{"p", "x"}}, set: map[string]bool{"content": true, "tag": true}},
			stdin: `{"kind":9,"content":"stdin","created_at":42,"tags":[["h","c2"]]}`,
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, "flag", ev.Content)
				require.EqualValues(t, 42, ev.CreatedAt)
				require.Equal(t, event.Tags{{"h", "c2"}, {"p", "x"}}, ev.Tags)
			},
		},
		{
			name:  "PresignedKept",
			flags: publishFlags{set: map[string]bool{}},
			stdin: string(presigned.AppendJSON(nil)),
			check: func(t *testing.T, ev event.Event) {
				require.Equal(t, presigned, ev)
			},
		},
		{name: "ForeignPubkey", flags: publishFlags{set: map[string]bool{}}, stdin: `{"pubkey":"` + event.PubKey(other) + `"}`, wantErr: true},
		{name: "NotJSON", flags: publishFlags{set: map[string]bool{}}, stdin: `nope`, wantErr: true},
		{name: "KindOutOfRange", flags: publishFlags{kind: 70000, set: map[string]bool{"kind": true}}, wantErr: true},
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

func TestReadFilters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		stdin   string
		want    int
		wantErr bool
	}{
		{"OneArg", []string{`{"kinds":[9]}`}, "", 1, false},
		{"ArrayArg", []string{`[{"kinds":[9]},{"kinds":[1]}]`}, "", 2, false},
		{"StdinObject", nil, `{"kinds":[9],"limit":5}`, 1, false},
		{"StdinArray", []string{"-"}, `[{"kinds":[9]},{"#p":["x"]}]`, 2, false},
		{"StdinLines", nil, "{\"kinds\":[9]}\n{\"kinds\":[1]}\n", 2, false},
		{"BadField", []string{`{"kinds":"9"}`}, "", 0, true},
		{"Empty", nil, "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs, err := readFilters(tt.args, strings.NewReader(tt.stdin))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Len(t, fs, tt.want)
		})
	}
}

func TestRelayURLs(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, http, ws string }{
		{"ws://localhost:3000", "http://localhost:3000", "ws://localhost:3000"},
		{"wss://relay.example.com/", "https://relay.example.com", "wss://relay.example.com/"},
		{"http://127.0.0.1:3000", "http://127.0.0.1:3000", "ws://127.0.0.1:3000"},
	}
	for _, tt := range tests {
		h, err := httpBase(tt.in)
		require.NoError(t, err)
		require.Equal(t, tt.http, h)
		w, err := wsURL(tt.in)
		require.NoError(t, err)
		require.Equal(t, tt.ws, w)
	}
	_, err := httpBase("ftp://x")
	require.Error(t, err)
}

func TestRun(t *testing.T) {
	t.Parallel()
	noenv := func(string) string { return "" }
	tests := []struct {
		name     string
		args     []string
		code     int
		stdoutRe string
		stderrRe string
	}{
		{"NoArgs", nil, exitUsage, "", "Usage"},
		{"Unknown", []string{"frob"}, exitUsage, "", `"error":"unknown command`},
		{"MissingKey", []string{"count", `{"kinds":[9]}`}, exitUsage, "", "BUZZ_PRIVATE_KEY"},
		{"Keygen", []string{"keygen"}, exitOK, `"private_key"`, ""},
		{"Help", []string{"help"}, exitOK, "Usage", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := run(t.Context(), tt.args, noenv, strings.NewReader(""), &out, &errb)
			require.Equal(t, tt.code, code, errb.String())
			require.Contains(t, out.String(), tt.stdoutRe)
			require.Contains(t, errb.String(), tt.stderrRe)
		})
	}

	t.Run("KeygenIsValid", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		require.Equal(t, exitOK, run(t.Context(), []string{"keygen"}, noenv, nil, &out, &out))
		var kp struct{ PrivateKey, Pubkey string }
		require.NoError(t, json.Unmarshal(out.Bytes(), &struct {
			PrivateKey *string `json:"private_key"`
			Pubkey     *string `json:"pubkey"`
		}{&kp.PrivateKey, &kp.Pubkey}))
		sk, err := hex.DecodeString(kp.PrivateKey)
		require.NoError(t, err)
		require.Equal(t, event.PubKey(sk), kp.Pubkey)
	})
}
