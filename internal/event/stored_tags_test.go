package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

func TestDecodeStoredTags(t *testing.T) {
	t.Parallel()
	tags, err := event.DecodeStoredTags([]byte(`[["e","ab",""],[],["t"]]`))
	require.NoError(t, err)
	require.Equal(t, event.Tags{{"e", "ab", ""}, {}, {"t"}}, tags)
	tags, err = event.DecodeStoredTags([]byte(`[]`))
	require.NoError(t, err)
	require.Empty(t, tags)
	for _, bad := range []string{`null`, `{}`, `"x"`, `[null]`, `[["a",null]]`, `[["a",1]]`, `[{"a":"b"}]`, `[["a"],"b"]`, `[`} {
		_, err := event.DecodeStoredTags([]byte(bad))
		require.Error(t, err, bad)
	}
}
