package config

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdmission: every quota takes 0 (off) up to 1,000,000 and refuses one
// over or a negative value, naming the variable; the p-tag cap takes 1 to
// 100,000 and cannot be turned off.
func TestAdmission(t *testing.T) {
	t.Parallel()
	field := map[string]func(Admission) int{
		"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN":           func(a Admission) int { return a.HumanMessagesPerMin },
		"BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN":          func(a Admission) int { return a.HumanAPICallsPerMin },
		"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC":          func(a Admission) int { return a.HumanWSEventsPerSec },
		"BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN":  func(a Admission) int { return a.AgentMessagesPerMin },
		"BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN": func(a Admission) int { return a.AgentAPICallsPerMin },
		"BUZZ_CHANNEL_CREATES_PER_HOUR":                    func(a Admission) int { return a.ChannelCreatesPerHour },
	}
	for name, get := range field {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for raw, want := range map[string]int{"0": 0, "7": 7, "1000000": 1000000} {
				c, warnings, err := load(t, name, raw)
				require.NoError(t, err, raw)
				require.Empty(t, warnings, "a known variable")
				require.Equal(t, want, get(c.Admission), raw)
			}
			for _, raw := range []string{"1000001", "-1", "ten"} {
				_, _, err := load(t, name, raw)
				require.EqualError(t, err, "invalid "+name+`: must be an integer between 0 and 1000000 (got "`+raw+`")`)
			}
		})
	}
	t.Run("MaxPTags", func(t *testing.T) {
		t.Parallel()
		for raw, want := range map[string]int{"1": 1, "100": 100, "100000": 100000} {
			c, _, err := load(t, "BUZZ_MAX_P_TAGS", raw)
			require.NoError(t, err, raw)
			require.Equal(t, want, c.Admission.MaxPTags)
		}
		for _, raw := range []string{"0", "100001"} {
			_, _, err := load(t, "BUZZ_MAX_P_TAGS", raw)
			require.EqualError(t, err, `invalid BUZZ_MAX_P_TAGS: must be an integer between 1 and 100000 (got "`+raw+`")`)
		}
	})
	t.Run("Logged", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN", "0")
		require.NoError(t, err)
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("config loaded", slog.Any("config", c))
		require.Contains(t, buf.String(), `"admission":{"human_messages_per_min":0,"human_api_calls_per_min":300,`+
			`"human_ws_events_per_sec":10,"agent_messages_per_min":120,"agent_api_calls_per_min":600,`+
			`"channel_creates_per_hour":20,"max_p_tags":100}`)
	})
	t.Run("TypoWarned", func(t *testing.T) {
		t.Parallel()
		_, warnings, err := load(t, "BUZZ_MAX_P_TAG", "5")
		require.NoError(t, err)
		require.Equal(t, []string{"unknown variable BUZZ_MAX_P_TAG is ignored (did you mean BUZZ_MAX_P_TAGS?)"}, warnings)
	})
}
