package ingest

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// admissionSetup is setup with a per-process limiter of q and MaxPTags.
func admissionSetup(t *testing.T, q admission.Quotas, maxPTags int) *testBundle {
	t.Helper()
	b := setup(t)
	l, err := admission.New(admission.Config{Quotas: q})
	require.NoError(t, err)
	b.p = New(Config{Pool: b.pool, Live: b.fanout, RelayKey: b.relay.SK, Admission: l, MaxPTags: maxPTags})
	return b
}

// TestAdmission: the pipeline's caps and quotas at the limit and one over,
// charged to the authenticated principal and only for events that passed
// check.
func TestAdmission(t *testing.T) {
	t.Parallel()

	t.Run("PTags", func(t *testing.T) {
		t.Parallel()
		b := admissionSetup(t, admission.Quotas{}, 3)
		k := eventtest.NewKey()
		withP := func(n int) event.Event {
			opts := []eventtest.Option{eventtest.Content(uuid.NewString())}
			for range n {
				opts = append(opts, eventtest.Tag("p", eventtest.NewKey().PubKey))
			}
			return k.Signed(t, 1, opts...)
		}
		atCap := b.mustSubmit(t, k, withP(3))
		require.Equal(t, 3, b.mentions(t, atCap.ID))
		over := withP(4)
		res := b.submit(t, k, over)
		require.Equal(t, Rejected, res.Code)
		require.Equal(t, "invalid: too many p tags (4, maximum 3)", res.Message)
		_, stored := b.lookup(t, over.ID)
		require.False(t, stored)
	})

	t.Run("DefaultPTags", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, 100, New(Config{}).cfg.MaxPTags)
	})

	t.Run("Messages", func(t *testing.T) {
		t.Parallel()
		b := admissionSetup(t, admission.Quotas{HumanMessagesPerMin: 2}, 0)
		k := eventtest.NewKey()
		bad := k.Signed(t, 1, eventtest.Content("forged"))
		bad.Content = "changed"
		require.Equal(t, Rejected, b.submit(t, k, bad).Code, "a refused check is not charged")
		b.mustSubmit(t, k, k.Signed(t, 1, eventtest.Content("one")))
		b.mustSubmit(t, k, k.Signed(t, 1, eventtest.Content("two")))
		over := k.Signed(t, 1, eventtest.Content("three"))
		res := b.submit(t, k, over)
		require.Equal(t, RateLimited, res.Code)
		require.Regexp(t, `^rate-limited: quota exceeded; retry in [0-9]+s$`, res.Message)
		require.True(t, res.RetryAfter >= 1 && res.RetryAfter <= 60, res.RetryAfter)
		_, stored := b.lookup(t, over.ID)
		require.False(t, stored)
		// A gift wrap's signer is not its sender: the authenticated author pays.
		other := eventtest.NewKey()
		wrap := eventtest.NewKey().Signed(t, event.KindGiftWrap, eventtest.Tag("p", other.PubKey))
		require.Equal(t, RateLimited, b.submit(t, k, wrap).Code)
		b.mustSubmit(t, other, other.Signed(t, 1, eventtest.Content("other")))
	})

	t.Run("ChannelCreates", func(t *testing.T) {
		t.Parallel()
		b := admissionSetup(t, admission.Quotas{ChannelCreatesPerHour: 1}, 0)
		k := eventtest.NewKey()
		res := b.submit(t, k, k.Signed(t, event.KindCreateGroup, eventtest.Tag("name", " ")))
		require.Equal(t, "invalid: channel name is required", res.Message, "an invalid 9007 is not charged")
		b.channel(t, k)
		res = b.submit(t, k, k.Signed(t, event.KindCreateGroup, eventtest.Tag("name", "second")))
		require.Equal(t, RateLimited, res.Code)
		require.True(t, res.RetryAfter > 3500 && res.RetryAfter <= 3600, res.RetryAfter)
		require.Zero(t, b.count(t, `SELECT count(*) FROM channels WHERE name = 'second'`))
		b.mustSubmit(t, k, k.Signed(t, 1, eventtest.Content("a message is not a channel")))
	})
}
