//go:build !cgo || !libsecp256k1

package event

// SignatureVerifier names the Schnorr verifier this binary was built with;
// the relay logs it at start.
const SignatureVerifier = "btcec (pure Go)"

func verifySchnorr(pk *[32]byte, msg *[32]byte, sig *[64]byte) bool {
	return verifyBtcec(pk, msg, sig)
}

func schnorrPubKey(sk *[32]byte) ([32]byte, bool) { return pubKeyBtcec(sk) }

func signSchnorr(sk, msg, aux *[32]byte) ([64]byte, bool) { return signBtcec(sk, msg, aux) }
