package abuse

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/wire"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestClassify(t *testing.T) {
	t.Parallel()
	live := context.Background()
	ended, cancel := context.WithCancel(live)
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		accepted bool
		msg      string
		err      error
		want     string
	}{
		{"Accepted", live, true, "", nil, OK},
		{"RefusedEvent", live, false, wire.Reason(wire.RateLimited, "quota exceeded; retry in 3s"), nil, "rate-limited:"},
		{"Duplicate", live, false, wire.MsgDuplicate, nil, "duplicate:"},
		{"NoPrefix", live, false, "nope", nil, Other},
		{"Closed", live, false, "", &client.RefusedError{Op: "query", Message: wire.Reason(wire.Invalid, "too many #p values")}, "invalid:"},
		{"HTTPWithPrefix", live, false, "", &client.RefusedError{Op: "POST /count", Status: 503, Message: wire.Reason(wire.Error, "read timed out")}, "error:"},
		{"HTTPWithout", live, false, "", &client.RefusedError{Op: "POST /count", Status: 413, Message: "body too large"}, "http-413"},
		{"Deadline", live, false, "", context.DeadlineExceeded, Timeout},
		{"CallerEnded", ended, false, "", errors.New("write: broken pipe"), Timeout},
		{"ConnectionGone", live, false, "", client.ErrClosed, Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name, _ := classify(tt.ctx, tt.accepted, tt.msg, tt.err)
			require.Equal(t, tt.want, name)
		})
	}
	o := NewOutcomes()
	o.Add(live, false, wire.MsgRateLimited, nil)
	o.Add(live, false, wire.MsgRateLimited, nil)
	o.Add(live, true, "", nil)
	o.Note("reqs-sent", 5)
	require.Equal(t, map[string]int{"rate-limited:": 2, OK: 1, "reqs-sent": 5}, o.Counts())
	require.Equal(t, []string{wire.MsgRateLimited}, o.First(), "each text once")
	require.Equal(t, 8, o.Total())
}

// TestAttacksAnswered runs every attack at a small scale against a second
// community of a real relay: each gets answers, and the attacks that
// need the relay to deliver or store show it did (today's relay, without
// the limits, accepts them).
func TestAttacksAnswered(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	target := Target{URL: "ws://" + r.Host, Host: r.Community(t, "attacked")}
	stored, refused := Seed(t.Context(), target, 30)
	require.Positive(t, stored+refused)
	opts := DefaultOptions()
	opts.Scale, opts.Concurrency = 0.01, 4
	for _, at := range All() {
		t.Run(at.Name, func(t *testing.T) {
			t.Parallel()
			env := &Env{Target: target, Key: event.GenerateKey(), Opts: opts, Outcomes: NewOutcomes()}
			if at.Prepare != nil {
				require.NoError(t, at.Prepare(env, time.Now(), 10*time.Second))
				require.NotEmpty(t, env.tokens.left)
			}
			signed := 0
			if env.tokens != nil {
				signed = len(env.tokens.left)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			require.NoError(t, at.Run(ctx, env))
			if env.tokens != nil {
				// The tokens signed ahead were the ones sent, and the relay
				// took them: no call was refused for its token.
				require.Less(t, len(env.tokens.left), signed)
				require.Zero(t, env.Outcomes.Counts()[Other], "%v %v", env.Outcomes.Counts(), env.Outcomes.First())
			}
			require.Positive(t, env.Outcomes.Total(), "%s: %v", at.Name, env.Outcomes.Counts())
			if at.Name == "tags-values" {
				require.Positive(t, env.Outcomes.Counts()["live-delivered"], env.Outcomes.Counts())
			}
		})
	}
}
