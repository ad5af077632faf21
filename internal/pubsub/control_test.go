package pubsub

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/metrics"
)

func TestControl(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RoundTripOwnOriginIgnored", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		c := Control{Community: newUUID(), Op: OpEvict, ChannelID: newUUID(), Pubkey: strings.Repeat("ef", 32)}
		require.NoError(t, bundle.a.PublishControl(ctx, c))

		select {
		case got := <-bundle.b.controls:
			want := c
			want.V, want.Origin = 1, bundle.a.ProcessID()
			require.Equal(t, want, got)
		case <-time.After(5 * time.Second):
			t.Fatal("B got no control message")
		}
		bundle.a.barrier(t)
		require.Empty(t, bundle.a.controls, "the origin applied it already")
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.ControlMessages.WithLabelValues("evict", "sent")))
		require.Equal(t, 1.0, counter(t, bundle.b.metrics.PubSub.ControlMessages.WithLabelValues("evict", "received")))
		require.Zero(t, counter(t, bundle.a.metrics.PubSub.ControlMessages.WithLabelValues("evict", "received")))
		require.Equal(t, 1.0, counter(t, bundle.b.metrics.PubSub.MessagesReceived.WithLabelValues("control")))
	})

	t.Run("WireFormat", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		sub := bundle.rc.Subscribe(ctx, ControlTopic)
		defer func() { _ = sub.Close() }()
		_, err := sub.Receive(ctx) // the confirmation
		require.NoError(t, err)

		community, channel, pubkey := newUUID(), newUUID(), strings.Repeat("01", 32)
		require.NoError(t, bundle.a.PublishControl(ctx, Control{Community: community, Op: OpMembership, ChannelID: channel, Pubkey: pubkey}))
		require.NoError(t, bundle.a.PublishControl(ctx, Control{Community: community, Op: OpAccessibleAll}))
		msg, err := sub.ReceiveMessage(ctx)
		require.NoError(t, err)
		require.Equal(t, `{"v":1,"origin":"`+bundle.a.ProcessID()+`","community":"`+community+
			`","op":"membership","channel_id":"`+channel+`","pubkey":"`+pubkey+`"}`, msg.Payload)
		msg, err = sub.ReceiveMessage(ctx)
		require.NoError(t, err)
		require.Equal(t, `{"v":1,"origin":"`+bundle.a.ProcessID()+`","community":"`+community+`","op":"accessible_all"}`, msg.Payload)
	})

	t.Run("EveryOpHasItsMetric", func(t *testing.T) {
		t.Parallel()
		var ops []string
		for op := range opFields {
			ops = append(ops, string(op))
		}
		require.ElementsMatch(t, ops, metrics.ControlOps)
	})

	t.Run("UnknownVersionOrOpIgnored", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		origin, community := newUUID(), newUUID()
		for _, payload := range []string{
			`{"v":2,"origin":"` + origin + `","community":"` + community + `","op":"accessible_all"}`,
			`{"v":1,"origin":"` + origin + `","community":"` + community + `","op":"rebalance","shard":3}`,
		} {
			require.NoError(t, bundle.rc.Publish(ctx, ControlTopic, payload).Err())
		}
		bundle.a.barrier(t)
		require.Empty(t, bundle.a.controls)
		require.Zero(t, counter(t, bundle.a.metrics.PubSub.InvalidMessages), "ignored, not invalid")
		require.Contains(t, bundle.a.logs.String(), "ignored control message")
		require.Contains(t, bundle.a.logs.String(), "reason=\"unknown version\"")
	})

	t.Run("MalformedDropped", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		origin, community := newUUID(), newUUID()
		for _, payload := range []string{
			`junk`,
			`{"v":1,"origin":"` + origin + `","community":"not-a-uuid","op":"accessible_all"}`,
			`{"v":1,"origin":"` + origin + `","community":"` + community + `","op":"evict","pubkey":"` + strings.Repeat("ab", 32) + `"}`,
			`{"v":1,"origin":"` + origin + `","community":"` + community + `","op":"visibility","channel_id":"` + newUUID() + `","pubkey":"` + strings.Repeat("ab", 32) + `"}`,
		} {
			require.NoError(t, bundle.rc.Publish(ctx, ControlTopic, payload).Err())
		}
		bundle.a.barrier(t)
		require.Empty(t, bundle.a.controls)
		require.Equal(t, 4.0, counter(t, bundle.a.metrics.PubSub.InvalidMessages))
	})

	t.Run("PublishChecksFields", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		require.ErrorContains(t, bundle.a.PublishControl(ctx, Control{Community: newUUID(), Op: "nope"}), "unknown op")
		require.ErrorContains(t, bundle.a.PublishControl(ctx, Control{Community: newUUID(), Op: OpRelayMemberRemoved}), "needs a hex pubkey")
		require.ErrorContains(t, bundle.a.PublishControl(ctx, Control{Community: "host.example", Op: OpAccessibleAll}), "community")
		require.ErrorContains(t, bundle.a.PublishControl(ctx, Control{Community: newUUID(), Op: OpGap}), "gap needs a positive until_ms")
		require.ErrorContains(t, bundle.a.PublishControl(ctx, Control{Community: newUUID(), Op: OpAccessibleAll, UntilMS: 1}), "accessible_all takes no until_ms")
	})

	t.Run("SkippedWhileDown", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.redis.Stop()
		bundle.a.TestSignals.Disconnected.WaitOrTimeout(t)
		err := bundle.a.PublishControl(ctx, Control{Community: newUUID(), Op: OpAccessibleAll})
		require.ErrorIs(t, err, ErrDisconnected)
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.PublishErrors.WithLabelValues("control")))
		require.Zero(t, counter(t, bundle.a.metrics.PubSub.ControlMessages.WithLabelValues("accessible_all", "sent")))
	})
}
