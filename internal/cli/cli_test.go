package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

func tree(ran *[]string, opts ...Option) *cobra.Command {
	root := Root(&cobra.Command{Use: "tool", Short: "a tool"}, opts...)
	var relay string
	root.PersistentFlags().StringVar(&relay, "relay", "ws://default", "relay URL")
	leaf := &cobra.Command{Use: "get", Short: "get a thing", Example: "  tool things get --id 1",
		RunE: func(c *cobra.Command, args []string) error {
			*ran = append(*ran, "get "+relay+" "+strings.Join(args, ","))
			return nil
		}}
	leaf.Flags().Int("id", 0, "the id")
	root.AddCommand(Group(&cobra.Command{Use: "things", Short: "things"}, leaf))
	return root
}

func exec(t *testing.T, args ...string) (out string, ran []string, err error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err = Execute(context.Background(), tree(&ran), args, strings.NewReader(""), &stdout, &stderr)
	require.Empty(t, stderr.String(), "nothing is printed on stderr by the package")
	return stdout.String(), ran, err
}

func TestHelpOnStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"things", "get", "--help"}, {"things", "get", "-h"}, {"help", "things", "get"}} {
		out, ran, err := exec(t, args...)
		require.NoError(t, err, args)
		require.Empty(t, ran, "help does not run the command")
		require.Contains(t, out, "tool things get")
		require.Contains(t, out, "--id")
		require.Contains(t, out, "tool things get --id 1", "the example is shown")
	}
	out, _, err := exec(t, "things", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "get")
}

func TestFlagsAnywhere(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--relay", "ws://x", "things", "get", "a"},
		{"things", "--relay", "ws://x", "get", "a"},
		{"things", "get", "a", "--relay", "ws://x"},
		{"things", "get", "--relay=ws://x", "a"},
	} {
		_, ran, err := exec(t, args...)
		require.NoError(t, err, args)
		require.Equal(t, []string{"get ws://x a"}, ran, args)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"things"}, `tool things: missing subcommand (one of: get; see: tool things --help)`},
		{[]string{"things", "put"}, `tool things: unknown subcommand "put" (one of: get)`},
		{[]string{"things", "get", "--id", "abc"}, `tool things get: invalid argument "abc" for "--id" flag`},
		{[]string{"things", "get", "--nope"}, `tool things get: unknown flag: --nope (see: tool things get --help)`},
	}
	for _, tt := range tests {
		_, ran, err := exec(t, tt.args...)
		require.True(t, IsUsage(err), "%v: %v", tt.args, err)
		require.Contains(t, err.Error(), tt.want)
		require.Empty(t, ran)
	}
	_, _, err := exec(t, "nothing")
	require.ErrorContains(t, err, `unknown command "nothing" for "tool"`)
}

func TestShortNames(t *testing.T) {
	t.Parallel()
	var ran []string
	var out bytes.Buffer
	root := tree(&ran, ShortNames())
	err := Execute(context.Background(), root, []string{"things", "get", "--nope"}, strings.NewReader(""), &out, &out)
	require.EqualError(t, err, "things get: unknown flag: --nope (see: tool things get --help)")
	root = tree(&ran, ShortNames())
	err = Execute(context.Background(), root, []string{"things"}, strings.NewReader(""), &out, &out)
	require.EqualError(t, err, "things: missing subcommand (one of: get; see: tool things --help)")
	require.Equal(t, "tool", Name(root))
}
