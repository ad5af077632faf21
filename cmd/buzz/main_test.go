package main

// The command-line tests run the real binary: TestMain builds it once, and
// each run starts it with exec.Command, an explicit environment (PATH and
// HOME, plus what the test names) and a real relay from relaytest where
// one is needed. Unit tests drive the options' bind and check directly.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// binary is the buzz built by TestMain.
var binary string

func TestMain(m *testing.M) { dbtest.MainWithBinary(m, "buzz", &binary) }

const (
	testChannel = "0b9c5a52-3f8e-4d6b-9a51-2c0e7d4f6a11"
	testID      = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	testID2     = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	testPubkey  = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// result is a finished run of the binary.
type result struct {
	code   int
	stdout string
	stderr string
}

// lines returns the JSON objects printed on stdout, one per line.
func (r result) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "stdout line %q", line)
		out = append(out, m)
	}
	return out
}

// errorObject decodes stderr, which must be exactly one JSON object line.
func (r result) errorObject(t *testing.T) map[string]any {
	t.Helper()
	require.True(t, strings.HasSuffix(r.stderr, "\n") && strings.Count(r.stderr, "\n") == 1, "one stderr line: %q", r.stderr)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &m), r.stderr)
	require.NotEmpty(t, m["error"], r.stderr)
	return m
}

// buzz runs the binary with args and stdin; its environment is PATH, HOME
// and env, nothing else of the test process.
func buzz(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = environ(env)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err, "run buzz %v", args)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// environ is PATH and HOME plus vars, as a sorted KEY=value list.
func environ(vars map[string]string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// cliUser runs buzz command lines as one key against one relay.
type cliUser struct {
	t     *testing.T
	relay string
	sk    string
}

func newUser(t *testing.T, r *relaytest.Relay) cliUser {
	return cliUser{t: t, relay: "ws://" + r.Host, sk: hex.EncodeToString(event.GenerateKey())}
}

func (u cliUser) env() map[string]string {
	return map[string]string{"BUZZ_PRIVATE_KEY": u.sk, "BUZZ_RELAY_URL": u.relay}
}

func (u cliUser) pubkey() string {
	sk, err := hex.DecodeString(u.sk)
	require.NoError(u.t, err)
	return event.PubKey(sk)
}

// run executes args and returns the result.
func (u cliUser) run(args ...string) result {
	u.t.Helper()
	return buzz(u.t, u.env(), "", args...)
}

// ok runs args, requires exit 0 and one accepted result line, and returns it.
func (u cliUser) ok(args ...string) map[string]any {
	u.t.Helper()
	res := u.run(args...)
	require.Equal(u.t, exitOK, res.code, "%v: %s", args, res.stderr)
	lines := res.lines(u.t)
	require.Len(u.t, lines, 1)
	require.Equal(u.t, true, lines[0]["accepted"], lines[0])
	return lines[0]
}

// refused runs args and requires exit 1 with message or error containing want.
func (u cliUser) refused(want string, args ...string) {
	u.t.Helper()
	res := u.run(args...)
	require.Equal(u.t, exitRefused, res.code, "%v: %s %s", args, res.stdout, res.stderr)
	got := ""
	if lines := res.lines(u.t); len(lines) == 1 {
		require.Equal(u.t, false, lines[0]["accepted"])
		require.Empty(u.t, res.stderr, "an OK false is the result line only")
		got = lines[0]["message"].(string)
	} else {
		got = res.errorObject(u.t)["error"].(string)
	}
	require.Contains(u.t, got, want)
}

// testApp is an app whose environment only sets BUZZ_RELAY_URL.
func testApp() *app {
	return &app{getenv: func(k string) string {
		if k == "BUZZ_RELAY_URL" {
			return "ws://env:1"
		}
		return ""
	}, stdin: strings.NewReader(""), stdout: io.Discard}
}

// parseArgs runs o's bind and check over args as the command would: a
// flag error is a usage error too.
func parseArgs(o options, args ...string) error {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.bind(fs)
	if err := fs.Parse(args); err != nil {
		return cli.Usagef("%v", err)
	}
	return o.check(fs, fs.Args())
}

func requireUsage(t *testing.T, err error) {
	t.Helper()
	require.True(t, cli.IsUsage(err), "want a usage error, got %v", err)
}

// closedPort returns a loopback port that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// httpRequests is the relay's http_requests_total over every route and
// status: the bridge requests it has answered.
func httpRequests(t *testing.T, r *relaytest.Relay) float64 {
	t.Helper()
	families, err := r.App.Registry().Gather()
	require.NoError(t, err)
	n := 0.0
	for _, f := range families {
		if f.GetName() == "http_requests_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"OK", nil, exitOK},
		{"RefusedResult", errRefused, exitRefused},
		{"Usage", cli.Usagef("x: bad"), exitUsage},
		{"Closed", &client.RefusedError{Op: "query", Message: "restricted: x"}, exitRefused},
		{"HTTP401", &client.RefusedError{Op: "POST /query", Status: http.StatusUnauthorized}, exitRefused},
		{"HTTP403", &client.RefusedError{Op: "POST /query", Status: http.StatusForbidden}, exitRefused},
		{"HTTP404", &client.RefusedError{Op: "POST /query", Status: http.StatusNotFound}, exitRefused},
		{"HTTP500", &client.RefusedError{Op: "POST /query", Status: http.StatusInternalServerError}, exitUsage},
		{"HTTP503", &client.RefusedError{Op: "POST /query", Status: http.StatusServiceUnavailable}, exitUsage},
		{"WithDetail", &detailError{err: &client.RefusedError{Op: "query"}, fields: map[string]any{"hint": "h"}}, exitRefused},
		{"Transport", fmt.Errorf("query: %w", &net.OpError{Op: "dial", Err: errors.New("refused")}), exitUsage},
		{"Other", errors.New("boom"), exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, exitStatus(tt.err))
		})
	}
}

func TestErrorObject(t *testing.T) {
	t.Parallel()
	refused := &client.RefusedError{Op: "query", Message: "restricted: no"}
	tests := []struct {
		name string
		cmd  string
		err  error
		want map[string]any
	}{
		{"UsageAsIs", "query", cli.Usagef("--get x: no field"), map[string]any{"error": "--get x: no field"}},
		{"OwnOpKept", "query", refused, map[string]any{"error": "query: restricted: no"}},
		{"CommandInFront", "messages list", refused, map[string]any{"error": "messages list: query: restricted: no"}},
		{"Fields", "query", &detailError{err: refused, fields: map[string]any{"hint": "do this"}},
			map[string]any{"error": "query: restricted: no", "hint": "do this"}},
		{"Unreachable", "count", fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}),
			map[string]any{"error": "count: dial: dial: connection refused (is the relay running? check --relay or BUZZ_RELAY_URL)"}},
		{"Timeout", "query", fmt.Errorf("query: %w", context.DeadlineExceeded),
			map[string]any{"error": "query: context deadline exceeded (no answer within --timeout; raise it, e.g. --timeout 2m)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, errorObject(tt.cmd, tt.err))
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
	_, err = wsURL("localhost:3000")
	require.Error(t, err)
}

// TestUsageErrors runs command lines that are wrong before any relay is
// involved: each exits 2 with one {"error"} line saying what to do.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	key := map[string]string{"BUZZ_PRIVATE_KEY": hex.EncodeToString(event.GenerateKey()), "BUZZ_RELAY_URL": "ws://" + closedPort(t)}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"UnknownCommand", nil, []string{"frob"}, `buzz: unknown command "frob" (one of: channels, count, keygen, messages, publish, query, threads, whoami; see: buzz --help)`},
		{"Suggestion", nil, []string{"qurey"}, `buzz: unknown command "qurey" (did you mean query? see: buzz --help)`},
		{"GroupAlone", nil, []string{"channels"}, "channels: missing subcommand (one of: add-member, create, join, leave, list, remove-member; see: buzz channels --help)"},
		{"UnknownSub", nil, []string{"messages", "frob"}, `messages: unknown subcommand "frob" (one of: delete, edit, list, react, search, send)`},
		{"UnknownHelpTopic", nil, []string{"help", "messages", "frob"}, `help: unknown command "messages frob" (see: buzz help)`},
		{"BadFlagValue", key, []string{"messages", "list", "--channel", testChannel, "--limit", "abc"},
			`messages list: invalid argument "abc" for "--limit" flag: strconv.ParseInt: parsing "abc": invalid syntax (see: buzz messages list --help)`},
		{"UnknownFlag", key, []string{"query", "--kind", "9"}, "query: unknown flag: --kind (see: buzz query --help)"},
		{"BadKinds", key, []string{"query", "--kinds", "9,x"}, `query: invalid argument "9,x" for "--kinds" flag: "x" is not a kind (an integer 0..65535) (see: buzz query --help)`},
		{"MissingKey", nil, []string{"count", `{"kinds":[9]}`}, `count: BUZZ_PRIVATE_KEY is not set (64 hex; make one with: eval "$(buzz keygen --export)")`},
		{"BadKey", map[string]string{"BUZZ_PRIVATE_KEY": "abc"}, []string{"whoami"}, "whoami: BUZZ_PRIVATE_KEY: "},
		{"UsageBeforeKey", nil, []string{"messages", "send", "--content", "x"}, "messages send: --channel is required (a channel UUID; see: buzz channels list)"},
		{"Positional", key, []string{"messages", "send", "--channel", testChannel, "hi"}, `messages send: unexpected argument "hi" (it takes only flags; see: buzz messages send --help)`},
		{"BadRelay", key, []string{"threads", "get", "--root", testID, "--channel", testChannel, "--relay", "ftp://x"},
			`threads get: --relay "ftp://x": scheme must be ws, wss, http or https`},
		{"BadTimeout", key, []string{"channels", "list", "--timeout", "0s"}, "channels list: --timeout 0s must be positive (e.g. 30s)"},
		{"Unreachable", key, []string{"channels", "list"}, "(is the relay running? check --relay or BUZZ_RELAY_URL)"},
		{"UnreachableHTTP", key, []string{"--http", "count", "--kinds", "9"}, "count: POST /count: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := buzz(t, tt.env, "", tt.args...)
			require.Equal(t, exitUsage, res.code, res.stderr)
			require.Contains(t, res.errorObject(t)["error"], tt.want)
			require.Empty(t, res.stdout)
		})
	}

	t.Run("NoArguments", func(t *testing.T) {
		t.Parallel()
		res := buzz(t, nil, "")
		require.Equal(t, exitUsage, res.code)
		require.Contains(t, res.stdout, "Usage:", "the root help is printed on stdout")
		require.Contains(t, res.stdout, "Exit status")
		require.Equal(t, "buzz: missing command (one of: channels, count, keygen, messages, publish, query, threads, whoami; see: buzz --help)",
			res.errorObject(t)["error"])
	})
}
