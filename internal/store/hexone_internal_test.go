package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHexOne holds hexOne's answer to a value that is not hex: nil (SQL
// NULL, which equals no row), never the bytes decoded before the bad digit.
func TestHexOne(t *testing.T) {
	t.Parallel()
	require.Equal(t, []byte{0xab, 0xcd}, hexOne("abcd"))
	require.Equal(t, []byte{}, hexOne(""), "the empty string stays an empty value, not NULL")
	for _, v := range []string{"abzz", "abc", "xy", "ab cd"} {
		require.Nil(t, hexOne(v), "%q", v)
	}
	require.Equal(t, [][]byte{{0x01}, nil, {0x02}}, hexList([]string{"01", "0g", "02"}))
}
