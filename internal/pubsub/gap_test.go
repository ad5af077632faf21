package pubsub

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A failed or skipped PUBLISH of a stored event owes the other processes a
// gap announcement for its community, sent as a gap control message once
// Redis takes publishes again; an ephemeral event owes none.
func TestGapAnnouncement(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	stored, ephemeral := newTopic(), newTopic()
	bundle.redis.Stop()
	require.Equal(t, LinkEvent{Up: false}, bundle.a.nextLink(t))
	before := time.Now()
	bundle.a.PublishEphemeral(t.Context(), ephemeral, newEvent().ID, []byte(`{}`))
	bundle.a.Publish(t.Context(), stored, newEvent().ID, []byte(`{}`))
	owed := bundle.a.missed.owed()
	require.Len(t, owed, 1, "only the stored event's community is owed")
	require.Contains(t, owed, stored.Community)

	bundle.redis.Restart()
	var c Control
	select {
	case c = <-bundle.b.controls:
	case <-time.After(10 * time.Second):
		t.Fatal("no gap announcement reached B")
	}
	require.Equal(t, Control{V: ControlVersion, Origin: bundle.a.ProcessID(), Community: stored.Community, Op: OpGap,
		UntilMS: owed[stored.Community]}, c)
	require.GreaterOrEqual(t, c.UntilMS, before.UnixMilli())
	require.Eventually(t, func() bool { return len(bundle.a.missed.owed()) == 0 }, 5*time.Second, 50*time.Millisecond,
		"paid once sent")
}
