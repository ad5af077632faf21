// Command buzz is the agent-first client of a Buzz relay: JSON in, JSON out.
//
// Every result is one JSON object per line on stdout; every error is one
// {"error":"…"} line on stderr. The exit status is 0 on success, 1 when the
// relay refused (an OK false, a CLOSED, a 4xx from the bridge) and 2 for
// usage or connection errors (messages search has its own statuses: see
// buzz help). The key comes from BUZZ_PRIVATE_KEY (64 hex),
// the relay from --relay, BUZZ_RELAY_URL or ws://localhost:3000.
//
// It does NOT keep state between runs, retry, or talk to more than one relay.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// Exit statuses.
const (
	exitOK      = 0
	exitRefused = 1
	exitUsage   = 2
)

// DefaultRelay is the relay used when neither --relay nor BUZZ_RELAY_URL is set.
const DefaultRelay = "ws://localhost:3000"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// app is what a subcommand sees of the process.
type app struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
}

// usageError is a mistake in the command line or environment (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errRefused marks a run whose result was printed but refused (exit 1).
var errRefused = errors.New("refused")

type command struct {
	summary string
	run     func(ctx context.Context, a *app, args []string) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"keygen":   {"print a new key pair", runKeygen},
		"publish":  {"sign and publish an event", runPublish},
		"query":    {"print the events matching filters", runQuery},
		"count":    {"print the number of events matching filters", runCount},
		"channels": {"create, list, join and leave channels; manage members", runChannels},
		"messages": {"send, list, react to, edit and delete messages", runMessages},
		"threads":  {"print a thread", runThreads},
		"help":     {"print this help", runHelp},
	}
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{getenv: getenv, stdin: stdin, stdout: stdout}
	if len(args) == 0 {
		_ = runHelp(ctx, &app{stdout: stderr}, nil)
		return exitUsage
	}
	name := args[0]
	if name == "-h" || name == "--help" {
		name = "help"
	}
	cmd, ok := commands[name]
	if !ok {
		writeError(stderr, fmt.Sprintf("unknown command %q (try: buzz help)", args[0]))
		return exitUsage
	}
	err := cmd.run(ctx, a, args[1:])
	var refused *client.RefusedError
	var searchErr *searchError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errRefused):
		return exitRefused
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &searchErr):
		_ = writeJSON(stderr, searchErr.errorObject())
		return searchErr.code
	case errors.As(err, &refused) && (refused.Status == 0 || refused.Status < 500):
		writeError(stderr, err.Error())
		return exitRefused
	default:
		writeError(stderr, err.Error())
		return exitUsage
	}
}

func writeError(w io.Writer, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	_, _ = w.Write(append(b, '\n'))
}

// writeJSON prints v as one line.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// common holds the flags every relay command takes.
type common struct {
	relay   string
	http    bool
	timeout time.Duration
}

func (c *common) register(fs *flag.FlagSet, getenv func(string) string) {
	def := getenv("BUZZ_RELAY_URL")
	if def == "" {
		def = DefaultRelay
	}
	fs.StringVar(&c.relay, "relay", def, "relay URL (ws:// or wss://); default BUZZ_RELAY_URL or "+DefaultRelay)
	fs.BoolVar(&c.http, "http", false, "use the HTTP bridge (POST /events, /query, /count with NIP-98)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "bound on the whole request")
}

// newFlagSet returns a FlagSet that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("buzz "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args allowing flags and positional arguments in any
// order ("-" is positional); everything after "--" is positional.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		before := args
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		consumed := len(before) - len(args)
		if consumed > 0 && before[consumed-1] == "--" {
			return append(pos, args...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// secretKey reads BUZZ_PRIVATE_KEY.
func secretKey(getenv func(string) string) ([]byte, error) {
	s := getenv("BUZZ_PRIVATE_KEY")
	if s == "" {
		return nil, usagef("BUZZ_PRIVATE_KEY is not set (64 hex; make one with: buzz keygen)")
	}
	sk, err := event.ParseSecretKey(strings.TrimSpace(s))
	if err != nil {
		return nil, usagef("BUZZ_PRIVATE_KEY: %v", err)
	}
	return sk, nil
}

// httpBase derives the bridge origin from a relay URL: ws→http, wss→https,
// http(s) kept; the path is dropped.
func httpBase(relay string) (string, error) {
	u, err := url.Parse(relay)
	if err != nil || u.Host == "" {
		return "", usagef("--relay %q is not a URL", relay)
	}
	switch u.Scheme {
	case "ws", "http":
		return "http://" + u.Host, nil
	case "wss", "https":
		return "https://" + u.Host, nil
	}
	return "", usagef("--relay %q: scheme must be ws, wss, http or https", relay)
}

// wsURL checks a relay URL for the WebSocket: ws(s) kept, http(s) mapped.
func wsURL(relay string) (string, error) {
	u, err := url.Parse(relay)
	if err != nil || u.Host == "" {
		return "", usagef("--relay %q is not a URL", relay)
	}
	switch u.Scheme {
	case "ws", "wss":
		return relay, nil
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", usagef("--relay %q: scheme must be ws, wss, http or https", relay)
	}
	return u.String(), nil
}

// relayClient is what query, count and publish need from either door.
type relayClient interface {
	Publish(ctx context.Context, ev event.Event) (bool, string, error)
	Query(ctx context.Context, filters ...event.Filter) ([]event.Event, error)
	Count(ctx context.Context, filters ...event.Filter) (int64, error)
}

// connect opens the door c selects; the returned func releases it.
func connect(ctx context.Context, c *common, sk []byte) (relayClient, func(), error) {
	if c.http {
		base, err := httpBase(c.relay)
		if err != nil {
			return nil, nil, err
		}
		return &client.HTTP{BaseURL: base, SK: sk}, func() {}, nil
	}
	u, err := wsURL(c.relay)
	if err != nil {
		return nil, nil, err
	}
	conn, err := client.Dial(ctx, u, sk)
	if err != nil {
		return nil, nil, err
	}
	return conn, func() { _ = conn.Close() }, nil
}
