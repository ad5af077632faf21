package pubsub

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/redistest"
)

func TestSendControl(t *testing.T) {
	t.Parallel()

	t.Run("ReachesARunningBus", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		bus := startBus(t, srv.URL(), nil)
		bus.TestSignals.Connected.WaitOrTimeout(t)
		community, pubkey := uuid.NewString(), eventtest.NewKey().PubKey
		require.NoError(t, SendControl(context.Background(), srv.URL(),
			Control{Community: community, Op: OpRelayMemberRemoved, Pubkey: pubkey}))
		got := <-bus.controls
		require.Equal(t, OpRelayMemberRemoved, got.Op)
		require.Equal(t, community, got.Community)
		require.Equal(t, pubkey, got.Pubkey)
		require.Equal(t, ControlVersion, got.V)
		require.NoError(t, uuid.Validate(got.Origin))
		require.NotEqual(t, bus.ProcessID(), got.Origin)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		err := SendControl(context.Background(), "redis://u:secret@127.0.0.1:1/0",
			Control{Community: uuid.NewString(), Op: OpRelayMemberRemoved, Pubkey: strings.Repeat("a", 64)})
		require.ErrorContains(t, err, "send control relay_member_removed: ")
		require.NotContains(t, err.Error(), "secret")

		err = SendControl(context.Background(), "http://u:secret@x", Control{Community: uuid.NewString(),
			Op: OpRelayMemberRemoved, Pubkey: strings.Repeat("a", 64)})
		require.EqualError(t, err, "send control: REDIS_URL is not a redis:// or rediss:// URL")

		err = SendControl(context.Background(), "redis://127.0.0.1:1", Control{Community: uuid.NewString(), Op: OpRelayMemberRemoved})
		require.EqualError(t, err, "send control relay_member_removed: relay_member_removed needs a hex pubkey")
	})
}
