package main

import (
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestHelpEverywhere asks every command of the tree for its help in the
// three ways a user may: --help, -h and help <path>.
func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	var paths [][]string
	cli.Walk(newRoot(testApp()), func(c *cobra.Command) {
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
	})
	require.Greater(t, len(paths), 15, "the walk sees the whole tree")
	require.Contains(t, paths, []string{"help"})
	for _, path := range paths {
		name := strings.Join(append([]string{"buzz"}, path...), " ")
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{
				slices.Concat(path, []string{"--help"}),
				slices.Concat(path, []string{"-h"}),
				slices.Concat([]string{"help"}, path),
			} {
				res := buzz(t, nil, "", args...)
				require.Equal(t, exitOK, res.code, "%v: %s", args, res.stderr)
				require.Empty(t, res.stderr, args)
				require.NotEmpty(t, res.stdout, args)
				require.Contains(t, res.stdout, name, args)
				require.Contains(t, res.stdout, "Usage:", args)
				require.Contains(t, res.stdout, "Examples:", args)
			}
		})
	}
}

// TestRootHelp checks what the root help promises: the output and exit
// convention and the environment.
func TestRootHelp(t *testing.T) {
	t.Parallel()
	res := buzz(t, nil, "", "help")
	require.Equal(t, exitOK, res.code)
	for _, want := range []string{"one JSON object per line", `{"error":"…"}`, "Exit status", "0  ok", "1  refused", "2  usage",
		"BUZZ_PRIVATE_KEY", "BUZZ_RELAY_URL", "--relay", "--http", "--timeout", "--get"} {
		require.Contains(t, res.stdout, want)
	}
}

// TestGlobalFlagsAnywhere runs the same command lines with the global
// flags before the command, between a group and its subcommand, and after
// it: each gives the same result. BUZZ_RELAY_URL points at a closed port,
// so only --relay reaches the relay, and the relay's count of bridge
// requests shows that --http took effect.
func TestGlobalFlagsAnywhere(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	u := newUser(t, r)
	relay := u.relay
	u.relay = "ws://" + closedPort(t)
	global := func(get string) []string {
		return []string{"--relay", relay, "--http", "--timeout", "20s", "--get", get}
	}

	ch := u.run(slices.Concat(global("channel_id"), []string{"channels", "create", "--name", "general"})...)
	require.Equal(t, exitOK, ch.code, ch.stderr)
	channel := strings.TrimSpace(ch.stdout)
	require.Len(t, channel, 36)

	// placements puts the global flags before cmd, after its first n
	// words (the group, or the command itself), and at the end.
	placements := func(get string, n int, cmd ...string) map[string][]string {
		g := global(get)
		return map[string][]string{
			"Before":  slices.Concat(g, cmd),
			"Between": slices.Concat(cmd[:n], g, cmd[n:]),
			"After":   slices.Concat(cmd, g),
		}
	}
	same := func(want string, lines map[string][]string) {
		t.Helper()
		for where, args := range lines {
			before := httpRequests(t, r)
			res := u.run(args...)
			require.Equal(t, exitOK, res.code, "%s %v: %s", where, args, res.stderr)
			require.Equal(t, want, res.stdout, "%s %v", where, args)
			require.Greater(t, httpRequests(t, r), before, "%s %v: --http is used", where, args)
		}
	}

	for i, where := range []string{"Before", "Between", "After"} {
		content := "note " + strconv.Itoa(i)
		res := u.run(placements("accepted", 1, "publish", "--kind", "1", "--content", content)[where]...)
		require.Equal(t, exitOK, res.code, res.stderr)
		require.Equal(t, "true\n", res.stdout, where)
	}
	authors := `{"kinds":[1],"authors":["` + u.pubkey() + `"]}`
	want := u.run("--relay", relay, "query", authors, "--get", "content")
	require.Equal(t, exitOK, want.code, want.stderr)
	require.ElementsMatch(t, []string{"note 0", "note 1", "note 2"}, strings.Split(strings.TrimSpace(want.stdout), "\n"))
	same(want.stdout, placements("content", 1, "query", authors))
	same("3\n", placements("count", 1, "count", authors))

	u.ok("--relay", relay, "messages", "send", "--channel", channel, "--content", "hi there")
	same(channel+"\n", placements("channel_id", 1, "channels", "list"))
	same("hi there\n", placements("content", 1, "messages", "list", "--channel", channel))
}

func TestGetField(t *testing.T) {
	t.Parallel()
	obj := []byte(`{"id":"abc","n":3,"ok":true,"tags":[["h","x"]],"nothing":null,"text":"a \"quoted\"\nline"}` + "\n")
	tests := []struct{ field, want string }{
		{"id", "abc\n"},
		{"n", "3\n"},
		{"ok", "true\n"},
		{"tags", `[["h","x"]]` + "\n"},
		{"nothing", "null\n"},
		{"text", "a \"quoted\"\nline\n"},
	}
	for _, tt := range tests {
		got, err := field(obj, tt.field)
		require.NoError(t, err, tt.field)
		require.Equal(t, tt.want, string(got), tt.field)
	}
	_, err := field(obj, "missing")
	requireUsage(t, err)
	require.EqualError(t, err, "--get missing: the output has no field missing (fields: id, n, ok, tags, nothing, text)")
}

// TestGetMissingField asks the binary for a field its output lacks.
func TestGetMissingField(t *testing.T) {
	t.Parallel()
	res := buzz(t, nil, "", "keygen", "--get", "nsec")
	require.Equal(t, exitUsage, res.code)
	require.Empty(t, res.stdout)
	require.Equal(t, map[string]any{"error": "--get nsec: the output has no field nsec (fields: private_key, pubkey, npub)"}, res.errorObject(t))
}

// keyPairOf decodes keygen's JSON output.
func keyPairOf(t *testing.T, stdout string) keyPair {
	t.Helper()
	var kp keyPair
	require.NoError(t, json.Unmarshal([]byte(stdout), &kp), stdout)
	return kp
}

func TestWhoamiMatchesKeygen(t *testing.T) {
	t.Parallel()
	gen := buzz(t, nil, "", "keygen")
	require.Equal(t, exitOK, gen.code, gen.stderr)
	kp := keyPairOf(t, gen.stdout)
	sk, err := hex.DecodeString(kp.PrivateKey)
	require.NoError(t, err)
	require.Equal(t, event.PubKey(sk), kp.PubKey)
	fromNPub, err := cli.ParseNPub(kp.NPub)
	require.NoError(t, err)
	require.Equal(t, kp.PubKey, fromNPub)

	who := buzz(t, map[string]string{"BUZZ_PRIVATE_KEY": kp.PrivateKey}, "", "whoami")
	require.Equal(t, exitOK, who.code, who.stderr)
	require.Empty(t, who.stderr)
	require.JSONEq(t, `{"pubkey":"`+kp.PubKey+`","npub":"`+kp.NPub+`"}`, who.stdout)

	other := buzz(t, nil, "", "keygen")
	require.NotEqual(t, kp.PrivateKey, keyPairOf(t, other.stdout).PrivateKey, "each run makes a new key")

	res := buzz(t, nil, "", "whoami")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.errorObject(t)["error"], "BUZZ_PRIVATE_KEY is not set")
}

func TestKeygenExport(t *testing.T) {
	t.Parallel()
	line := regexp.MustCompile(`^export ([A-Za-z_][A-Za-z0-9_]*)=([0-9a-f]{64})\n$`)
	res := buzz(t, nil, "", "keygen", "--export")
	require.Equal(t, exitOK, res.code, res.stderr)
	m := line.FindStringSubmatch(res.stdout)
	require.NotNil(t, m, res.stdout)
	require.Equal(t, "BUZZ_PRIVATE_KEY", m[1])

	res = buzz(t, nil, "", "keygen", "--export=BOB_KEY")
	require.Equal(t, exitOK, res.code, res.stderr)
	m = line.FindStringSubmatch(res.stdout)
	require.NotNil(t, m, res.stdout)
	require.Equal(t, "BOB_KEY", m[1])

	for _, args := range [][]string{{"keygen", "--export=1x"}, {"keygen", "--export", "BOB_KEY"}, {"keygen", "--export", "--get", "pubkey"}} {
		res := buzz(t, nil, "", args...)
		require.Equal(t, exitUsage, res.code, args)
		require.Empty(t, res.stdout, args)
		require.Contains(t, res.errorObject(t)["error"], "keygen: ", args)
	}

	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Log("no bash: the line format above is the check")
		return
	}
	script := `eval "$("$BUZZ" keygen --export)" && echo "$BUZZ_PRIVATE_KEY" && "$BUZZ" whoami && ` +
		`eval "$("$BUZZ" keygen --export=OTHER)" && BUZZ_PRIVATE_KEY=$OTHER "$BUZZ" whoami --get pubkey && echo "$OTHER"`
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = environ(map[string]string{"BUZZ": binary})
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, got, 4, string(out))
	sk, err := hex.DecodeString(got[0])
	require.NoError(t, err)
	var who identity
	require.NoError(t, json.Unmarshal([]byte(got[1]), &who))
	require.Equal(t, event.PubKey(sk), who.PubKey, "whoami sees the exported key")
	other, err := hex.DecodeString(got[3])
	require.NoError(t, err)
	require.Equal(t, event.PubKey(other), got[2], "--export=NAME sets NAME")
}
