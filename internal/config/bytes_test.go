package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadByteBudgets(t *testing.T) {
	t.Parallel()

	t.Run("EventDefaultFollowsSmallerFrame", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_MAX_FRAME_BYTES", "262144")
		require.NoError(t, err)
		require.Equal(t, ByteBudgets{MaxEventBytes: 262144, ReadMaxBytes: 8388608, SendBufferBytes: 16777216}, c.Bytes)
	})

	t.Run("EventAtFrameLimit", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_MAX_EVENT_BYTES", "524288")
		require.NoError(t, err)
		require.Equal(t, 524288, c.Bytes.MaxEventBytes)
	})

	t.Run("SmallBudgetsAtTheirBounds", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_MAX_EVENT_BYTES", "1024", "BUZZ_READ_MAX_BYTES", "1024", "BUZZ_SEND_BUFFER_BYTES", "2048")
		require.NoError(t, err)
		require.Equal(t, ByteBudgets{MaxEventBytes: 1024, ReadMaxBytes: 1024, SendBufferBytes: 2048}, c.Bytes)
	})

	t.Run("SendFollowsLargeReadBudget", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_READ_MAX_BYTES", "33554432")
		require.NoError(t, err)
		require.Equal(t, 67108864, c.Bytes.SendBufferBytes)
	})

	for _, tc := range []struct {
		name string
		kv   []string
		want string
	}{
		{"EventOverFrameLimit", []string{"BUZZ_MAX_EVENT_BYTES", "524289"},
			`invalid BUZZ_MAX_EVENT_BYTES: must be an integer between 1024 and 524288 (got "524289")`},
		{"EventUnderMinimum", []string{"BUZZ_MAX_EVENT_BYTES", "1023"},
			`invalid BUZZ_MAX_EVENT_BYTES: must be an integer between 1024 and 524288 (got "1023")`},
		{"EventNotNumber", []string{"BUZZ_MAX_EVENT_BYTES", "big"},
			`invalid BUZZ_MAX_EVENT_BYTES: must be an integer between 1024 and 524288 (got "big")`},
		{"ReadUnderEventSize", []string{"BUZZ_MAX_EVENT_BYTES", "2048", "BUZZ_READ_MAX_BYTES", "2047"},
			"invalid BUZZ_READ_MAX_BYTES: must be at least BUZZ_MAX_EVENT_BYTES (2048), or the largest event could never be read (got 2047)"},
		{"ReadOverMaximum", []string{"BUZZ_READ_MAX_BYTES", "1073741825"},
			`invalid BUZZ_READ_MAX_BYTES: must be an integer between 1024 and 1073741824 (got "1073741825")`},
		{"SendUnderTwiceRead", []string{"BUZZ_MAX_EVENT_BYTES", "1024", "BUZZ_READ_MAX_BYTES", "1024", "BUZZ_SEND_BUFFER_BYTES", "2047"},
			`invalid BUZZ_SEND_BUFFER_BYTES: must be an integer between 2048 and 2147483648 (got "2047")`},
		{"SendUnderTwiceDefaultRead", []string{"BUZZ_SEND_BUFFER_BYTES", "16777215"},
			"invalid BUZZ_SEND_BUFFER_BYTES: must be at least twice BUZZ_READ_MAX_BYTES (16777216), so one whole history never closes its reader (got 16777215)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := load(t, tc.kv...)
			require.EqualError(t, err, tc.want)
			var ce *Error
			require.ErrorAs(t, err, &ce)
		})
	}
}
