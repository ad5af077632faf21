package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestNonHexArgumentsAreRefused holds that a method taking a hex id or
// pubkey refuses one that is not hex with an error naming the operation,
// rather than querying or writing with the bytes decoded before the bad
// digit.
func TestNonHexArgumentsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	key := eventtest.NewKey()
	good := key.PubKey
	bad := "ab" + strings.Repeat("zz", 31) // decodes one byte, then fails
	d := "x"
	ev := key.Signed(t, 9)
	for _, tc := range []struct {
		op  string
		run func() error
	}{
		{"read-state watermark", func() error {
			_, _, err := b.s.ReadStateWatermark(ctx, store.ReplaceableKey{CommunityID: b.a, Kind: 30078, Pubkey: bad, DTag: &d})
			return err
		}},
		{"read-state remove head", func() error {
			_, err := b.s.ReadStateRemoveHead(ctx, store.ReplaceableKey{CommunityID: b.a, Kind: 30078, Pubkey: bad, DTag: &d})
			return err
		}},
		{"read-state advance", func() error {
			return b.s.ReadStateAdvance(ctx, store.ReplaceableKey{CommunityID: b.a, Kind: 30078, Pubkey: bad, DTag: &d}, ev.ID, ev.CreatedAt)
		}},
		{"channel state", func() error {
			_, err := b.s.ChannelStateGet(ctx, b.a, "00000000-0000-0000-0000-000000000000", bad)
			return err
		}},
		{"accessible channels", func() error {
			_, err := b.s.AccessibleChannels(ctx, b.a, bad)
			return err
		}},
		{"confirm channels", func() error {
			_, err := b.s.ChannelsAccessible(ctx, b.a, bad, []string{"00000000-0000-0000-0000-000000000000"})
			return err
		}},
		{"add reaction: target id", func() error {
			_, err := b.s.ReactionAdd(ctx, store.ReactionAddParams{CommunityID: b.a, Target: bad, Pubkey: good, Emoji: "+", ReactionEventID: ev.ID})
			return err
		}},
		{"add reaction: pubkey", func() error {
			_, err := b.s.ReactionAdd(ctx, store.ReactionAddParams{CommunityID: b.a, Target: ev.ID, Pubkey: bad, Emoji: "+", ReactionEventID: ev.ID})
			return err
		}},
		{"add reaction: reaction id", func() error {
			_, err := b.s.ReactionAdd(ctx, store.ReactionAddParams{CommunityID: b.a, Target: ev.ID, Pubkey: good, Emoji: "+", ReactionEventID: bad})
			return err
		}},
		{"remove reaction", func() error { return b.s.ReactionRemove(ctx, b.a, bad) }},
		{"soft delete event", func() error {
			_, err := b.s.EventSoftDelete(ctx, b.a, bad, ev.CreatedAt)
			return err
		}},
		{"replaceable head", func() error {
			_, _, err := b.s.ReplaceableHead(ctx, store.ReplaceableKey{CommunityID: b.a, Kind: 0, Pubkey: bad})
			return err
		}},
		{"supersede replaceable", func() error {
			return b.s.ReplaceableSupersede(ctx, store.ReplaceableKey{CommunityID: b.a, Kind: 0, Pubkey: bad})
		}},
		{"set nip05", func() error { return b.s.UserSetNIP05(ctx, b.a, bad, nil) }},
		{"set channel add policy", func() error { return b.s.UserSetAddPolicy(ctx, b.a, bad, "anyone") }},
	} {
		err := tc.run()
		require.Error(t, err, tc.op)
		require.Contains(t, err.Error(), tc.op, "the error names the operation")
		require.Contains(t, err.Error(), "invalid byte", "%s: the error is the hex decoder's", tc.op)
	}
}
