package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/cli"
)

// commandPaths returns every command of the tree as its words after
// "buzz-relay" (the root is the empty path), and the groups among them.
func commandPaths(t *testing.T) (all, groups [][]string) {
	t.Helper()
	cli.Walk(newRoot(func() {}), func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		all = append(all, path)
		if c.HasParent() && c.HasSubCommands() {
			groups = append(groups, path)
		}
	})
	require.Greater(t, len(all), 15, "the walk found the whole tree")
	return all, groups
}

// Issue 10: every command answers -h, --help and `help <path>` with its
// usage, flags and an example on stdout, exit 0.
func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	all, groups := commandPaths(t)
	env := baseEnv()
	for _, path := range all {
		name := "Root"
		if len(path) > 0 {
			name = strings.Join(path, "_")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmdPath := strings.Join(append([]string{"buzz-relay"}, path...), " ")
			for _, args := range [][]string{
				append(append([]string{}, path...), "--help"),
				append(append([]string{}, path...), "-h"),
				append([]string{"help"}, path...),
			} {
				res := runBinary(t, env, args...)
				require.Equal(t, 0, res.Code, "buzz-relay %v\nstderr:\n%s", args, res.Stderr)
				require.Empty(t, res.Stderr, "buzz-relay %v", args)
				require.NotEmpty(t, res.Stdout, "buzz-relay %v", args)
				for _, want := range []string{cmdPath, "Usage:", "Flags:", "Examples:"} {
					require.Contains(t, res.Stdout, want, "buzz-relay %v", args)
				}
			}
		})
	}

	t.Run("RootHelpSaysWhereConfigComesFrom", func(t *testing.T) {
		t.Parallel()
		res := runBinary(t, env, "help")
		require.Equal(t, 0, res.Code)
		for _, want := range []string{"docs/OPERATIONS.md", "BUZZ_BIND_ADDR", "BUZZ_HEALTH_PORT", "BUZZ_METRICS_PORT",
			"one JSON object per line", "stderr"} {
			require.Contains(t, res.Stdout, want)
		}
	})

	t.Run("AuditHeadSaysHowToMakeAKey", func(t *testing.T) {
		t.Parallel()
		res := runBinary(t, env, "audit", "head", "--help")
		require.Equal(t, 0, res.Code)
		require.Contains(t, res.Stdout, "export BUZZ_RELAY_PRIVATE_KEY=$(buzz keygen --get private_key)")
	})

	t.Run("GroupWithoutSubcommand", func(t *testing.T) {
		t.Parallel()
		require.NotEmpty(t, groups)
		root := newRoot(func() {})
		for _, path := range groups {
			group, _, err := root.Find(path)
			require.NoError(t, err)
			subs := cli.SubcommandNames(group)
			for _, args := range [][]string{path, append(append([]string{}, path...), "no-such-subcommand")} {
				res := runBinary(t, env, args...)
				require.Equal(t, 2, res.Code, "buzz-relay %v", args)
				require.Empty(t, res.Stdout, "buzz-relay %v", args)
				require.Contains(t, res.Stderr, "one of: "+strings.Join(subs, ", "), "buzz-relay %v", args)
			}
		}
	})

	t.Run("UnknownFlagIsNamed", func(t *testing.T) {
		t.Parallel()
		for _, path := range all {
			args := append(append([]string{}, path...), "--no-such-flag")
			res := runBinary(t, env, args...)
			require.Equal(t, 2, res.Code, "buzz-relay %v", args)
			require.Empty(t, res.Stdout, "buzz-relay %v", args)
			require.Contains(t, res.Stderr, "unknown flag: --no-such-flag", "buzz-relay %v", args)
			require.NotContains(t, res.Stderr, "{", "plain text, not JSON: buzz-relay %v", args)
		}
	})

	t.Run("UnknownCommandAndHelpTopic", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"no-such-command"}, {"help", "no-such-command"}, {"help", "community", "rename"}} {
			res := runBinary(t, env, args...)
			require.Equal(t, 2, res.Code, "buzz-relay %v", args)
			require.Empty(t, res.Stdout, "buzz-relay %v", args)
			require.Contains(t, res.Stderr, "buzz-relay --help", "buzz-relay %v", args)
		}
	})

	t.Run("Version", func(t *testing.T) {
		t.Parallel()
		v := runBinary(t, env, "version")
		require.Equal(t, 0, v.Code)
		require.Equal(t, "dev\n", v.Stdout)
		require.Equal(t, v, runBinary(t, env, "--version"))
	})
}
