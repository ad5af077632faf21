//go:build cgo && libsecp256k1

package event

/*
#cgo LDFLAGS: -lsecp256k1
#cgo noescape buzz_schnorr_verify
#cgo nocallback buzz_schnorr_verify
#cgo noescape buzz_xonly_pubkey
#cgo nocallback buzz_xonly_pubkey
#cgo noescape buzz_schnorr_sign
#cgo nocallback buzz_schnorr_sign
#include <string.h>
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

// A signing context, randomized once with seed32 (blinding against side
// channels) before any goroutine uses it.
static secp256k1_context *buzz_sign_context(const unsigned char *seed32) {
	secp256k1_context *ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
	if (ctx != NULL && !secp256k1_context_randomize(ctx, seed32)) {
		secp256k1_context_destroy(ctx);
		return NULL;
	}
	return ctx;
}

// The x-only public key of sk32 into pk32. Returns 0 when sk32 is not a
// valid secret key (zero, or not below the curve order).
static int buzz_xonly_pubkey(const secp256k1_context *ctx,
		const unsigned char *sk32, unsigned char *pk32) {
	secp256k1_keypair kp;
	secp256k1_xonly_pubkey pub;
	int ok = secp256k1_keypair_create(ctx, &kp, sk32) &&
		secp256k1_keypair_xonly_pub(ctx, &pub, NULL, &kp) &&
		secp256k1_xonly_pubkey_serialize(ctx, pk32, &pub);
	memset(&kp, 0, sizeof kp);
	return ok;
}

// The BIP-340 signature of msg32 by sk32 into sig64, with aux32 as the
// auxiliary randomness. Returns 0 when sk32 is not a valid secret key.
static int buzz_schnorr_sign(const secp256k1_context *ctx,
		const unsigned char *sk32, const unsigned char *msg32,
		const unsigned char *aux32, unsigned char *sig64) {
	secp256k1_keypair kp;
	int ok = secp256k1_keypair_create(ctx, &kp, sk32) &&
		secp256k1_schnorrsig_sign32(ctx, sig64, msg32, &kp, aux32);
	memset(&kp, 0, sizeof kp);
	return ok;
}
*/
import "C"

import (
	"crypto/rand"
	"unsafe"
)

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

// signContext is created once, randomized, and never freed; keypair
// creation and signing take it const, so goroutines share it.
var signContext = newSignContext()

func newSignContext() *C.secp256k1_context {
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // crypto/rand does not fail (it panics instead)
	ctx := C.buzz_sign_context((*C.uchar)(&seed[0]))
	if ctx == nil {
		panic("event: libsecp256k1 signing context")
	}
	return ctx
}

func schnorrPubKey(sk *[32]byte) (pk [32]byte, ok bool) {
	ok = C.buzz_xonly_pubkey(signContext, (*C.uchar)(&sk[0]), (*C.uchar)(unsafe.Pointer(&pk[0]))) == 1
	return pk, ok
}

// signSchnorr signs with aux as the auxiliary randomness, fresh random
// bytes when aux is nil (as BIP-340 recommends).
func signSchnorr(sk, msg, aux *[32]byte) (sig [64]byte, ok bool) {
	if aux == nil {
		aux = new([32]byte)
		_, _ = rand.Read(aux[:])
	}
	ok = C.buzz_schnorr_sign(signContext, (*C.uchar)(&sk[0]), (*C.uchar)(&msg[0]),
		(*C.uchar)(&aux[0]), (*C.uchar)(unsafe.Pointer(&sig[0]))) == 1
	return sig, ok
}
