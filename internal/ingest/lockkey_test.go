package ingest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/store"
)

// TestLockKeyNonHexPubkey holds that two coordinates whose pubkeys are not
// hex (the pipeline refuses such events before it locks) still get two
// keys: the pubkey's text is hashed instead of the empty or partial bytes a
// failed decode leaves.
func TestLockKeyNonHexPubkey(t *testing.T) {
	t.Parallel()
	const cid = "6f1f2d4c-8d3c-4f0e-9a63-1a2b3c4d5e6f"
	a := store.ReplaceableKey{CommunityID: cid, Kind: 0, Pubkey: strings.Repeat("zz", 32)}
	b := store.ReplaceableKey{CommunityID: cid, Kind: 0, Pubkey: strings.Repeat("yy", 32)}
	require.NotEqual(t, lockKey(a), lockKey(b))
	require.Equal(t, lockKey(a), lockKey(a), "the key is a function of the coordinate")
}
