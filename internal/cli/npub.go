package cli

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil/bech32"
)

// NPub encodes a 64-hex public key as a NIP-19 npub. It returns "" when
// pubHex is not 64 hex characters.
func NPub(pubHex string) string {
	raw, err := hex.DecodeString(pubHex)
	if err != nil || len(raw) != 32 {
		return ""
	}
	data, err := bech32.ConvertBits(raw, 8, 5, true)
	if err != nil {
		return ""
	}
	s, err := bech32.Encode("npub", data)
	if err != nil {
		return ""
	}
	return s
}

// ParseNPub decodes a NIP-19 npub into the lowercase 64-hex public key.
func ParseNPub(s string) (string, error) {
	hrp, data, err := bech32.Decode(s)
	if err != nil {
		return "", fmt.Errorf("not a valid npub: %w", err)
	}
	if hrp != "npub" {
		return "", fmt.Errorf("not an npub (prefix %q)", hrp)
	}
	raw, err := bech32.ConvertBits(data, 5, 8, false)
	if err != nil {
		return "", fmt.Errorf("not a valid npub: %w", err)
	}
	if len(raw) != 32 {
		return "", fmt.Errorf("not a valid npub: %d bytes, want 32", len(raw))
	}
	return strings.ToLower(hex.EncodeToString(raw)), nil
}
