package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/wire"
)

// TestAdmissionMessages pins the refusals of per-user admission.
func TestAdmissionMessages(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, got, want string }{
		{"QuotaExceeded", wire.QuotaExceeded(42), "rate-limited: quota exceeded; retry in 42s"},
		{"QuotaExceededAtLeastOne", wire.QuotaExceeded(0), "rate-limited: quota exceeded; retry in 1s"},
		{"TooManyPTags", wire.TooManyPTags(101, 100), "invalid: too many p tags (101, maximum 100)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.got)
		})
	}
}
