package event

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
)

// GenerateKey returns a new random 32-byte secret key.
func GenerateKey() []byte {
	for {
		sk := make([]byte, 32)
		if _, err := rand.Read(sk); err != nil {
			panic("event: crypto/rand failed: " + err.Error())
		}
		priv, _ := btcec.PrivKeyFromBytes(sk)
		if !priv.Key.IsZero() {
			return sk
		}
	}
}

// PubKey returns the lowercase hex x-only public key of the secret key sk.
// It panics when sk is not a valid secret key (ParseSecretKey and
// GenerateKey return only valid ones).
func PubKey(sk []byte) string {
	if len(sk) != 32 {
		panic("event: secret key must be 32 bytes")
	}
	pk, ok := schnorrPubKey((*[32]byte)(sk))
	if !ok {
		panic("event: invalid secret key")
	}
	return hex.EncodeToString(pk[:])
}

// ParseSecretKey decodes a 64-hex secret key.
func ParseSecretKey(s string) ([]byte, error) {
	if !IsHexAnyCase64(s) {
		return nil, errors.New("secret key must be 64 hex characters")
	}
	sk, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	if _, ok := privBtcec((*[32]byte)(sk)); !ok {
		return nil, errors.New("secret key is zero or not below the curve order")
	}
	return sk, nil
}
