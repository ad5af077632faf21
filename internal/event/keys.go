package event

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
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
func PubKey(sk []byte) string {
	priv, _ := btcec.PrivKeyFromBytes(sk)
	return hex.EncodeToString(schnorr.SerializePubKey(priv.PubKey()))
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
	priv, _ := btcec.PrivKeyFromBytes(sk)
	if priv.Key.IsZero() {
		return nil, errors.New("secret key is zero")
	}
	return sk, nil
}
