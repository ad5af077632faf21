package event

import (
	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// Signatures have two implementations behind three functions,
// verifySchnorr, signSchnorr and schnorrPubKey, chosen when the package
// is built:
//
//   - verify_purego.go, the default (no build tag, cgo on or off), uses
//     btcec's schnorr package, pure Go: the module builds anywhere Go
//     does, with no C library or headers;
//   - verify_cgo.go (cgo on and -tags libsecp256k1) calls libsecp256k1
//     (Debian libsecp256k1-dev) through cgo, several times faster per
//     verification than the pure-Go code.
//
// SignatureVerifier names the one that was built. verifySchnorr takes the
// decoded x-only public key, the 32-byte event id (the BIP-340 message)
// and the 64-byte signature, and reports whether the signature is valid;
// signSchnorr signs an id (with the given auxiliary randomness, or a
// nonce of its own when nil), and schnorrPubKey derives the x-only public
// key. Both refuse a secret key that is zero or not below the curve
// order. The relay signs its own follow-up events and the bench tools sign
// their load, so signing is as much on the hot path as verifying.
//
// The scripts turn the tag on where the library is installed
// (scripts/secp256k1-tags.sh); docs/OPERATIONS.md "Signature verification"
// says how to pick one by hand.

// verifyBtcec is the pure-Go BIP-340 verification. It is the verifier of
// the pure-Go build and the reference the cgo build is checked against.
func verifyBtcec(pk *[32]byte, msg *[32]byte, sig *[64]byte) bool {
	pub, err := schnorr.ParsePubKey(pk[:])
	if err != nil {
		return false
	}
	s, err := schnorr.ParseSignature(sig[:])
	if err != nil {
		return false
	}
	return s.Verify(msg[:], pub)
}

// pubKeyBtcec is the pure-Go x-only public key of sk; false when sk is
// zero or not below the curve order.
func pubKeyBtcec(sk *[32]byte) (pk [32]byte, ok bool) {
	priv, ok := privBtcec(sk)
	if !ok {
		return pk, false
	}
	copy(pk[:], schnorr.SerializePubKey(priv.PubKey()))
	return pk, true
}

// signBtcec is the pure-Go BIP-340 signature of msg by sk, with aux as the
// auxiliary randomness, or btcec's deterministic nonce when aux is nil;
// false when sk is zero or not below the curve order.
func signBtcec(sk, msg, aux *[32]byte) (sig [64]byte, ok bool) {
	priv, ok := privBtcec(sk)
	if !ok {
		return sig, false
	}
	var opts []schnorr.SignOption
	if aux != nil {
		opts = append(opts, schnorr.CustomNonce(*aux))
	}
	s, err := schnorr.Sign(priv, msg[:], opts...)
	if err != nil {
		return sig, false
	}
	copy(sig[:], s.Serialize())
	return sig, true
}

func privBtcec(sk *[32]byte) (*btcec.PrivateKey, bool) {
	var k btcec.ModNScalar
	if overflow := k.SetBytes(sk); overflow != 0 || k.IsZero() {
		return nil, false
	}
	return btcec.PrivKeyFromScalar(&k), true
}

// decodeHexInto decodes s, hex of either case, into dst. It reports false
// unless s is exactly 2*len(dst) hex digits. It does not allocate.
func decodeHexInto(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := fromHexDigit(s[2*i])
		lo, ok2 := fromHexDigit(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
