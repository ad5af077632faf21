package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The NIP-19 example key.
const (
	nip19Hex  = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
	nip19NPub = "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6"
)

func TestNPub(t *testing.T) {
	t.Parallel()
	require.Equal(t, nip19NPub, NPub(nip19Hex))
	require.Empty(t, NPub("zz"))
	got, err := ParseNPub(nip19NPub)
	require.NoError(t, err)
	require.Equal(t, nip19Hex, got)

	for _, bad := range []string{
		"npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w7", // checksum
		"nsec180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6", // prefix
		"npub1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq",   // length
		"hello",
	} {
		_, err := ParseNPub(bad)
		require.Error(t, err, bad)
	}
}
