// Command buzz is the agent-first client of a Buzz relay: JSON in, JSON out.
//
// Every result is one JSON object per line on stdout (--get FIELD prints
// only that field of each); every error is one {"error":"…"} line on
// stderr, sometimes with more fields ("hint", "candidates"). One exit
// convention holds for every command: 0 ok, 1 refused by the relay, 2
// usage or connection error (see exitStatus). The key comes from
// BUZZ_PRIVATE_KEY (64 hex), the relay from --relay, BUZZ_RELAY_URL or
// ws://localhost:3000.
//
// The command tree is built on cobra through internal/cli: every command
// answers -h/--help, and the global flags go anywhere on the line.
//
// It does NOT keep state between runs, retry, or talk to more than one relay.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/client"
)

// Exit statuses, the same for every command.
const (
	exitOK      = 0
	exitRefused = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status. An error is
// printed on stderr as one JSON object, except errRefused, whose result
// line is already on stdout.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{getenv: getenv, stdin: stdin, stdout: stdout}
	err := cli.Execute(ctx, newRoot(a), args, stdin, stdout, stderr)
	if err != nil && !errors.Is(err, errRefused) {
		enc := json.NewEncoder(stderr)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(errorObject(a.name, err))
	}
	return exitStatus(err)
}

// errRefused marks a run whose result was printed and says the relay
// refused (an OK false): exit 1 with nothing more on stderr.
var errRefused = errors.New("refused")

// exitStatus is the one exit convention of buzz: 0 ok; 1 refused by the
// relay (OK false, CLOSED, an HTTP 4xx including 401 and 403, a lookup
// that found nothing, a display name that does not resolve); 2 usage or
// connection errors (bad flags or arguments, a missing key, an unreachable
// relay, an HTTP 5xx). messages search follows it too: it has no separate
// codes of its own (such as 1 bad input, 2 relay, 3 auth, 4 other), so that a script handles every command alike.
func exitStatus(err error) int {
	var refused *client.RefusedError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errRefused):
		return exitRefused
	case cli.IsUsage(err):
		return exitUsage
	case errors.As(err, &refused) && refused.Status < 500:
		return exitRefused
	default:
		return exitUsage
	}
}

// detailError adds fields to the {"error"} object of err (a "hint", the
// "candidates" of a display name); the message and exit status stay err's.
type detailError struct {
	err    error
	fields map[string]any
}

func (e *detailError) Error() string { return e.err.Error() }
func (e *detailError) Unwrap() error { return e.err }

// errorObject is the stderr line for err, which the command name ran into
// ("" when no command ran). Errors that do not come from the command line
// itself (the relay's answers, the transport) get the command name in
// front, and a transport failure says what to check.
func errorObject(name string, err error) map[string]any {
	msg := err.Error()
	if !cli.IsUsage(err) {
		if name != "" && !strings.HasPrefix(msg, name+":") {
			msg = name + ": " + msg
		}
		msg += transportAdvice(err)
	}
	obj := map[string]any{"error": msg}
	var de *detailError
	if errors.As(err, &de) {
		for k, v := range de.fields {
			obj[k] = v
		}
	}
	return obj
}

// transportAdvice says what to check when err is a network failure.
func transportAdvice(err error) string {
	var opErr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return " (no answer within --timeout; raise it, e.g. --timeout 2m)"
	case errors.As(err, &opErr):
		return " (is the relay running? check --relay or BUZZ_RELAY_URL)"
	}
	return ""
}
