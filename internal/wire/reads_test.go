package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/wire"
)

// TestReadMessages pins the read-share, read-deadline and busy refusals.
func TestReadMessages(t *testing.T) {
	t.Parallel()
	require.Equal(t, "rate-limited: too many concurrent reads", wire.MsgTooManyReads)
	require.Equal(t, "error: read timed out", wire.MsgReadTimedOut)
	require.Equal(t, "error: server busy", wire.MsgServerBusy)
}
