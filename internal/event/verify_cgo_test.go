//go:build cgo && libsecp256k1

package event

import (
	"crypto/rand"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCgoVerifierIsSelected(t *testing.T) {
	t.Parallel()
	require.Equal(t, "libsecp256k1 (cgo)", SignatureVerifier)
}

// TestCgoAgreesWithBtcec checks libsecp256k1 against the pure-Go verifier on
// valid signatures and on each one corrupted in several ways: a flipped bit
// of the message, key or signature, random keys (most not on the curve),
// r at or above the field size, s at or above the curve order, and wholly
// random signatures.
func TestCgoAgreesWithBtcec(t *testing.T) {
	t.Parallel()
	signed := 500
	if raceEnabled {
		signed = 40
	}
	fieldP := mustHex32(t, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F")
	orderN := mustHex32(t, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141")
	var checked, valid int
	check := func(pk, msg [32]byte, sig [64]byte, what string) {
		t.Helper()
		want := verifyBtcec(&pk, &msg, &sig)
		require.Equal(t, want, verifySchnorr(&pk, &msg, &sig), "%s: pk %x msg %x sig %x", what, pk, msg, sig)
		checked++
		if want {
			valid++
		}
	}
	flip := func(b []byte) {
		var r [2]byte
		_, _ = rand.Read(r[:])
		i := int(binary.LittleEndian.Uint16(r[:])) % (len(b) * 8)
		b[i/8] ^= 1 << (i % 8)
	}
	for range signed {
		ev := randomSigned(t)
		var pk, msg [32]byte
		var sig [64]byte
		require.True(t, decodeHexInto(pk[:], ev.PubKey))
		require.True(t, decodeHexInto(msg[:], ev.ID))
		require.True(t, decodeHexInto(sig[:], ev.Sig))
		check(pk, msg, sig, "valid")

		m := msg
		flip(m[:])
		check(pk, m, sig, "flipped message bit")
		p := pk
		flip(p[:])
		check(p, msg, sig, "flipped key bit")
		s := sig
		flip(s[:])
		check(pk, msg, s, "flipped signature bit")

		var rp [32]byte
		_, _ = rand.Read(rp[:])
		check(rp, msg, sig, "random key")

		s = sig
		copy(s[:32], fieldP[:])
		s[31] += byte(checked % 3) // p, p+1, p+2
		check(pk, msg, s, "r >= p")
		s = sig
		copy(s[32:], orderN[:])
		s[63] += byte(checked % 3) // n, n+1, n+2
		check(pk, msg, s, "s >= n")

		var rs [64]byte
		_, _ = rand.Read(rs[:])
		check(pk, msg, rs, "random signature")
	}
	require.Equal(t, 8*signed, checked)
	require.GreaterOrEqual(t, valid, signed, "every signed input verifies")
	t.Logf("%d inputs, %d valid", checked, valid)
}

// TestCgoVerifyDoesNotAllocate holds the reason for the stack arrays and the
// noescape directive: a verification costs no heap allocation.
func TestCgoVerifyDoesNotAllocate(t *testing.T) {
	ev := randomSigned(t)
	allocs := testing.AllocsPerRun(200, func() {
		if !ev.VerifySignature() {
			t.Fatal("valid signature rejected")
		}
	})
	require.Zero(t, allocs)
}

// TestCgoVerifyConcurrent uses the one shared context from many goroutines
// (run under -race by scripts/test.sh).
func TestCgoVerifyConcurrent(t *testing.T) {
	t.Parallel()
	evs := make([]Event, 8)
	for i := range evs {
		evs[i] = randomSigned(t)
	}
	errs := make(chan bool, 8)
	for g := range 8 {
		go func() {
			ok := true
			for i := range 200 {
				ev := evs[(g+i)%len(evs)]
				ok = ok && ev.VerifySignature()
				ev.Sig = flipHexDigit(ev.Sig, i%128)
				ok = ok && !ev.VerifySignature()
			}
			errs <- ok
		}()
	}
	for range 8 {
		require.True(t, <-errs)
	}
}

func mustHex32(t *testing.T, s string) [32]byte {
	t.Helper()
	var b [32]byte
	require.True(t, decodeHexInto(b[:], s))
	return b
}
