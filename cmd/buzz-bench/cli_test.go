package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/cli"
)

// TestHelpEverywhere asks every command for its help: exit 0, the help on
// stdout, with an example.
func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	var paths [][]string
	cli.Walk(newRoot(), func(c *cobra.Command) {
		if c.Name() == "help" {
			return
		}
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
	})
	require.Greater(t, len(paths), 10)
	for _, path := range paths {
		t.Run(strings.Join(append([]string{"Root"}, path...), "_"), func(t *testing.T) {
			t.Parallel()
			var out, errb strings.Builder
			require.Equal(t, 0, run(t.Context(), append(path, "--help"), &out, &errb), errb.String())
			if len(path) == 2 && path[1] == "storm" { // parses its own flags: usage on stderr
				require.Contains(t, errb.String(), "--conns")
				return
			}
			require.Contains(t, out.String(), "Examples:", "help of %v", path)
		})
	}
}

// TestSubcommands checks that every benchmark is a subcommand of its own
// and that a mistake on the line is an {"error": …} line with exit 2.
func TestSubcommands(t *testing.T) {
	t.Parallel()
	want := []string{"abuse", "fanout", "fixture", "http-ingest", "idle", "ingest", "req", "run", "soak", "windows"}
	require.Equal(t, want, cli.SubcommandNames(newRoot()))
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"Missing", "missing subcommand", nil},
		{"Unknown", `unknown subcommand "buzz-soak"`, []string{"buzz-soak"}},
		{"PhaseOnlyOnRun", "unknown flag: --phase", []string{"ingest", "--phase", "req"}},
		{"BadPhase", `--phase: unknown phase "search"`, []string{"run", "--phase", "search"}},
		{"AbuseNeedsHost", "abuse needs --abuse-host", []string{"abuse"}},
		{"FixtureRemote", "only loads local databases", []string{"fixture", "--database-url", "postgres://u@8.8.8.8/db"}},
		{"WindowsSizes", "--replies must be at least", []string{"windows", "--replies", "10"}},
		{"SoakFault", `unknown fault "meteor"`, []string{"soak", "--faults", "meteor", "--relay-bin", "/bin/true"}},
		{"Extra", `unknown command "extra"`, []string{"windows", "extra"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errb strings.Builder
			require.Equal(t, 2, run(t.Context(), tt.args, &out, &errb))
			require.Empty(t, out.String())
			var line map[string]string
			require.NoError(t, json.Unmarshal([]byte(errb.String()), &line), errb.String())
			require.Contains(t, line["error"], tt.want)
		})
	}
}
