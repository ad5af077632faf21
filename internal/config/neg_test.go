package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The negentropy limits (docs/OPERATIONS.md "Negentropy sync"): each at its
// bounds, one over refused naming the variable, the message cap tied to
// the frame cap.
func TestNegLimits(t *testing.T) {
	t.Parallel()
	c, _, err := load(t)
	require.NoError(t, err)
	require.Equal(t, NegLimits{MaxRecords: 500_000, MaxSessions: 4, IdleTimeout: time.Minute, MaxMessageBytes: 128 << 10}, c.Neg)

	c, warnings, err := load(t, "BUZZ_NEG_MAX_RECORDS", "10000000", "BUZZ_NEG_MAX_SESSIONS", "64",
		"BUZZ_NEG_IDLE_TIMEOUT_MS", "3600000", "BUZZ_NEG_MAX_MESSAGE_BYTES", "174762")
	require.NoError(t, err)
	require.Empty(t, warnings)
	require.Equal(t, NegLimits{MaxRecords: 10_000_000, MaxSessions: 64, IdleTimeout: time.Hour, MaxMessageBytes: 174762}, c.Neg)
	c, _, err = load(t, "BUZZ_NEG_MAX_RECORDS", "1", "BUZZ_NEG_MAX_SESSIONS", "1",
		"BUZZ_NEG_IDLE_TIMEOUT_MS", "1000", "BUZZ_NEG_MAX_MESSAGE_BYTES", "4096")
	require.NoError(t, err)
	require.Equal(t, NegLimits{MaxRecords: 1, MaxSessions: 1, IdleTimeout: time.Second, MaxMessageBytes: 4096}, c.Neg)

	c, _, err = load(t, "BUZZ_MAX_FRAME_BYTES", "65536")
	require.NoError(t, err)
	require.Equal(t, 65536/3, c.Neg.MaxMessageBytes, "the default keeps to a third of the frame cap")

	for _, kv := range [][2]string{
		{"BUZZ_NEG_MAX_RECORDS", "0"}, {"BUZZ_NEG_MAX_RECORDS", "10000001"},
		{"BUZZ_NEG_MAX_SESSIONS", "0"}, {"BUZZ_NEG_MAX_SESSIONS", "65"},
		{"BUZZ_NEG_IDLE_TIMEOUT_MS", "999"}, {"BUZZ_NEG_IDLE_TIMEOUT_MS", "3600001"},
		{"BUZZ_NEG_MAX_MESSAGE_BYTES", "4095"}, {"BUZZ_NEG_MAX_MESSAGE_BYTES", "174763"},
	} {
		_, _, err := load(t, kv[0], kv[1])
		var ce *Error
		require.ErrorAs(t, err, &ce, kv)
		require.Equal(t, kv[0], ce.Variable, kv)
	}
}
