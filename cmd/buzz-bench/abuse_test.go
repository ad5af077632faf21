package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/abuse"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestBenchAbuse runs the abuse phase briefly, every attack at a small
// scale against a second community of the relay, and checks the report's
// shape: every attack with both windows, honest operations in each, and
// the attacker's answers counted. It asserts no timing.
func TestBenchAbuse(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	attacked := r.Community(t, "attacked")
	// Windows of 3 s: each must see honest operations and an attacker's
	// answer, and on a loaded test machine one publish can take most of
	// a second.
	lines := benchLines(t, r, "abuse", "--abuse-host", attacked, "--abuse-seconds", "3",
		"--abuse-honest", "3", "--abuse-rate", "2", "--abuse-scale", "0.01", "--abuse-seed", "60", "--abuse-conc", "4")
	names := abuse.Names()
	require.Len(t, lines, 1+len(names)+1, lines) // abuse-setup, one line per attack, summary
	setup := lines[0]
	require.Equal(t, "abuse-setup", setup["phase"], setup)
	require.Equal(t, attacked, setup["attacked_host"])
	require.Nil(t, setup["note"], "the relay accepts the honest channel")
	require.Positive(t, setup["seeded"], setup)
	channel := setup["channel"].(string)
	for i, name := range names {
		line := lines[1+i]
		require.Equal(t, "abuse", line["phase"], line)
		require.Equal(t, name, line["attack"], line)
		require.Nil(t, line["error"], line)
		for _, w := range []string{"baseline", "during"} {
			win := line[w].(map[string]any)
			for _, op := range []string{"publish", "req"} {
				require.Positive(t, win[op].(map[string]any)["ops"], "%s %s %s: %v", name, w, op, line)
			}
			slowest := win["slowest"].([]any)
			require.NotEmpty(t, slowest, line)
			first := slowest[0].(map[string]any)
			maxOf := func(op string) float64 { return win[op].(map[string]any)["max_ms"].(float64) }
			require.InDelta(t, max(maxOf("publish"), maxOf("req")), first["ms"], 0.002, "the slowest first")
			require.Less(t, first["at_s"], win["seconds"], line)
		}
		require.NotEmpty(t, line["attacker"], line)
		require.Contains(t, line["ratio"], "publish_p99", line)
		require.Contains(t, line["ratio"], "req_p99", line)
	}
	sum := lines[len(lines)-1]
	require.Equal(t, "summary", sum["phase"])
	require.Len(t, sum["abuse"], len(names), sum)

	// The honest clients stayed in their own community: none of the
	// attacked community's kind 1 notes is here, and their channel is.
	require.Zero(t, stored(t, r, event.Filter{Kinds: []int{event.KindNote}}))
	require.Positive(t, stored(t, r, event.Filter{Kinds: []int{event.KindStreamMessage}, Tags: map[string][]string{"h": {channel}}}))
}

func TestParseAbuse(t *testing.T) {
	t.Parallel()
	c, err := parseConfig([]string{"--phase", "abuse", "--abuse-host", "b.test:3000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, abuse.Names(), c.abuse.attacks, "every attack by default")
	require.Equal(t, 60*time.Second, c.abuse.window, "768 honest operations of each kind a window")
	require.Equal(t, abuse.DefaultOptions(), c.abuse.opts, "the full attack by default")

	c, err = parseConfig([]string{"--phase", "abuse", "--abuse-host", "b.test", "--abuse-attacks", "read-flood, wide-req",
		"--abuse-seconds", "0.5", "--abuse-scale", "0.1"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"read-flood", "wide-req"}, c.abuse.attacks, "in the order given")
	require.Equal(t, 500*time.Millisecond, c.abuse.window)
	require.InDelta(t, 0.1, c.abuse.opts.Scale, 1e-9)

	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"NoHost", "needs --abuse-host", []string{"--phase", "abuse"}},
		{"HonestHost", "a community other than --relay's", []string{"--relay", "ws://localhost:3000", "--phase", "abuse", "--abuse-host", "LOCALHOST:3000"}},
		{"UnknownAttack", `unknown attack "meteor"`, []string{"--abuse-attacks", "wide-req,meteor"}},
		{"ZeroScale", "must be positive", []string{"--abuse-scale", "0"}},
		{"ZeroWindow", "must be positive", []string{"--abuse-seconds", "0"}},
		{"NegativeSeed", "not negative", []string{"--abuse-seed", "-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig(tt.args, io.Discard)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err = parseConfig([]string{"--abuse-seed", "0"}, io.Discard)
	require.NoError(t, err, "no seeding is allowed")
}
