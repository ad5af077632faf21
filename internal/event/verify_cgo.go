//go:build cgo && libsecp256k1

package event

/*
#cgo LDFLAGS: -lsecp256k1
#cgo noescape buzz_schnorr_verify
#cgo nocallback buzz_schnorr_verify
#include <secp256k1.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>

// Releases before 0.2.0 have no SECP256K1_CONTEXT_NONE and need the VERIFY
// flag to verify; from 0.2.0 on VERIFY is a deprecated alias of NONE.
#ifndef SECP256K1_CONTEXT_NONE
#define SECP256K1_CONTEXT_NONE SECP256K1_CONTEXT_VERIFY
#endif

static secp256k1_context *buzz_verify_context(void) {
	return secp256k1_context_create(SECP256K1_CONTEXT_NONE);
}

// One call from Go per verification: parse the x-only key into a stack
// value, then verify. Returns 1 when the signature is valid.
static int buzz_schnorr_verify(const secp256k1_context *ctx,
		const unsigned char *pk32, const unsigned char *msg32,
		const unsigned char *sig64) {
	secp256k1_xonly_pubkey pub;
	if (!secp256k1_xonly_pubkey_parse(ctx, &pub, pk32)) {
		return 0;
	}
	return secp256k1_schnorrsig_verify(ctx, sig64, msg32, 32, &pub);
}
*/
import "C"

// SignatureVerifier names the Schnorr verifier this binary was built with;
// the relay logs it at start.
const SignatureVerifier = "libsecp256k1 (cgo)"

// verifyContext is created once and never freed. libsecp256k1 functions
// that take a const context, as parse and verify do, are safe to call from
// many goroutines at once.
var verifyContext = C.buzz_verify_context()

func verifySchnorr(pk *[32]byte, msg *[32]byte, sig *[64]byte) bool {
	// The arrays hold no Go pointers and C keeps none of them past the
	// call (noescape), so they can stay on the caller's stack.
	return C.buzz_schnorr_verify(verifyContext,
		(*C.uchar)(&pk[0]), (*C.uchar)(&msg[0]), (*C.uchar)(&sig[0])) == 1
}
