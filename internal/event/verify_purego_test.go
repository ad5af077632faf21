//go:build !cgo || !libsecp256k1

package event

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPureGoVerifierIsSelected holds the default build: without the tag
// libsecp256k1 (or without cgo) the relay verifies with btcec and needs no
// C library.
func TestPureGoVerifierIsSelected(t *testing.T) {
	t.Parallel()
	require.Equal(t, "btcec (pure Go)", SignatureVerifier)
}
