package event

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bip340Vector is one verification row of BIP-340's test-vectors.csv.
type bip340Vector struct {
	index   int
	pubKey  string
	msg     string
	sig     string
	valid   bool
	comment string
}

// bip340Vectors are rows 0-14 of the BIP's test-vectors.csv. Rows 15-18
// sign messages of 0, 1, 17 and 100 bytes; an event id is always 32 bytes,
// so those rows cannot be expressed as an event and are left out.
var bip340Vectors = []bip340Vector{
	{0, "F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"E907831F80848D1069A5371B402410364BDF1C5F8307B0084C55F1CE2DCA821525F66A4A85EA8B71E482A74F382D2CE5EBEEE8FDB2172F477DF4900D310536C0",
		true, ""},
	{1, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"6896BD60EEAE296DB48A229FF71DFE071BDE413E6D43F917DC8DCF8C78DE33418906D11AC976ABCCB20B091292BFF4EA897EFCB639EA871CFA95F6DE339E4B0A",
		true, ""},
	{2, "DD308AFEC5777E13121FA72B9CC1B7CC0139715309B086C960E18FD969774EB8",
		"7E2D58D8B3BCDF1ABADEC7829054F90DDA9805AAB56C77333024B9D0A508B75C",
		"5831AAEED7B44BB74E5EAB94BA9D4294C49BCF2A60728D8B4C200F50DD313C1BAB745879A5AD954A72C45A91C3A51D3C7ADEA98D82F8481E0E1E03674A6F3FB7",
		true, ""},
	{3, "25D1DFF95105F5253C4022F628A996AD3A0D95FBF21D468A1B33F8C160D8F517",
		"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
		"7EB0509757E246F19449885651611CB965ECC1A187DD51B64FDA1EDC9637D5EC97582B9CB13DB3933705B32BA982AF5AF25FD78881EBB32771FC5922EFC66EA3",
		true, "test fails if msg is reduced modulo p or n"},
	{4, "D69C3509BB99E412E68B0FE8544E72837DFA30746D8BE2AA65975F29D22DC7B9",
		"4DF3C3F68FCC83B27E9D42C90431A72499F17875C81A599B566C9889B9696703",
		"00000000000000000000003B78CE563F89A0ED9414F5AA28AD0D96D6795F9C6376AFB1548AF603B3EB45C9F8207DEE1060CB71C04E80F593060B07D28308D7F4",
		true, ""},
	{5, "EEFDEA4CDB677750A420FEE807EACF21EB9898AE79B9768766E4FAA04A2D4A34",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B",
		false, "public key not on the curve"},
	{6, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"FFF97BD5755EEEA420453A14355235D382F6472F8568A18B2F057A14602975563CC27944640AC607CD107AE10923D9EF7A73C643E166BE5EBEAFA34B1AC553E2",
		false, "has_even_y(R) is false"},
	{7, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"1FA62E331EDBC21C394792D2AB1100A7B432B013DF3F6FF4F99FCB33E0E1515F28890B3EDB6E7189B630448B515CE4F8622A954CFE545735AAEA5134FCCDB2BD",
		false, "negated message"},
	{8, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769961764B3AA9B2FFCB6EF947B6887A226E8D7C93E00C5ED0C1834FF0D0C2E6DA6",
		false, "negated s value"},
	{9, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"0000000000000000000000000000000000000000000000000000000000000000123DDA8328AF9C23A94C1FEECFD123BA4FB73476F0D594DCB65C6425BD186051",
		false, "sG - eP is infinite (x(inf) taken as 0)"},
	{10, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"00000000000000000000000000000000000000000000000000000000000000017615FBAF5AE28864013C099742DEADB4DBA87F11AC6754F93780D5A1837CF197",
		false, "sG - eP is infinite (x(inf) taken as 1)"},
	{11, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"4A298DACAE57395A15D0795DDBFD1DCB564DA82B0F269BC70A74F8220429BA1D69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B",
		false, "sig[0:32] is not an X coordinate on the curve"},
	{12, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B",
		false, "sig[0:32] is equal to field size"},
	{13, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141",
		false, "sig[32:64] is equal to curve order"},
	{14, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC30",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B",
		false, "public key exceeds the field size"},
}

// TestBIP340Vectors runs the BIP's verification rows through
// VerifySignature (the verifier this build selected, SignatureVerifier)
// and through the pure-Go reference, in the csv's upper case and in the
// lower case of stored events.
func TestBIP340Vectors(t *testing.T) {
	t.Parallel()
	t.Logf("verifier: %s", SignatureVerifier)
	for _, v := range bip340Vectors {
		for _, lower := range []bool{false, true} {
			ev := Event{PubKey: v.pubKey, ID: v.msg, Sig: v.sig}
			if lower {
				ev = Event{PubKey: strings.ToLower(v.pubKey), ID: strings.ToLower(v.msg), Sig: strings.ToLower(v.sig)}
			}
			require.Equal(t, v.valid, ev.VerifySignature(), "row %d (%s), lower case %v", v.index, v.comment, lower)

			var pk, msg [32]byte
			var sig [64]byte
			require.True(t, decodeHexInto(pk[:], ev.PubKey))
			require.True(t, decodeHexInto(msg[:], ev.ID))
			require.True(t, decodeHexInto(sig[:], ev.Sig))
			require.Equal(t, v.valid, verifyBtcec(&pk, &msg, &sig), "btcec, row %d (%s)", v.index, v.comment)
		}
	}
}

// bip340SignVectors are the signing rows (0-3) of the BIP's
// test-vectors.csv: secret key, public key, auxiliary randomness, message
// and signature.
var bip340SignVectors = []struct{ sk, pk, aux, msg, sig string }{
	{"0000000000000000000000000000000000000000000000000000000000000003",
		"F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"E907831F80848D1069A5371B402410364BDF1C5F8307B0084C55F1CE2DCA821525F66A4A85EA8B71E482A74F382D2CE5EBEEE8FDB2172F477DF4900D310536C0"},
	{"B7E151628AED2A6ABF7158809CF4F3C762E7160F38B4DA56A784D9045190CFEF",
		"DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
		"0000000000000000000000000000000000000000000000000000000000000001",
		"243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
		"6896BD60EEAE296DB48A229FF71DFE071BDE413E6D43F917DC8DCF8C78DE33418906D11AC976ABCCB20B091292BFF4EA897EFCB639EA871CFA95F6DE339E4B0A"},
	{"C90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B14E5C9",
		"DD308AFEC5777E13121FA72B9CC1B7CC0139715309B086C960E18FD969774EB8",
		"C87AA53824B4D7AE2EB035A2B5BBBCCC080E76CDC6D1692C4B0B62D798E6D906",
		"7E2D58D8B3BCDF1ABADEC7829054F90DDA9805AAB56C77333024B9D0A508B75C",
		"5831AAEED7B44BB74E5EAB94BA9D4294C49BCF2A60728D8B4C200F50DD313C1BAB745879A5AD954A72C45A91C3A51D3C7ADEA98D82F8481E0E1E03674A6F3FB7"},
	{"0B432B2677937381AEF05BB02A66ECD012773062CF3FA2549E44F58ED2401710",
		"25D1DFF95105F5253C4022F628A996AD3A0D95FBF21D468A1B33F8C160D8F517",
		"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
		"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
		"7EB0509757E246F19449885651611CB965ECC1A187DD51B64FDA1EDC9637D5EC97582B9CB13DB3933705B32BA982AF5AF25FD78881EBB32771FC5922EFC66EA3"},
}

// TestBIP340Signing runs the BIP's signing rows through the signer this
// build selected and through the pure-Go reference: the derived public key
// and, with the row's auxiliary randomness, the signature are the BIP's.
// Without auxiliary randomness each signs a valid signature of its own.
func TestBIP340Signing(t *testing.T) {
	t.Parallel()
	hex32 := func(s string) *[32]byte {
		var b [32]byte
		require.True(t, decodeHexInto(b[:], s), s)
		return &b
	}
	for i, v := range bip340SignVectors {
		sk, aux, msg := hex32(v.sk), hex32(v.aux), hex32(v.msg)
		for _, impl := range []struct {
			name string
			pub  func(*[32]byte) ([32]byte, bool)
			sign func(sk, msg, aux *[32]byte) ([64]byte, bool)
		}{{SignatureVerifier, schnorrPubKey, signSchnorr}, {"btcec", pubKeyBtcec, signBtcec}} {
			pk, ok := impl.pub(sk)
			require.True(t, ok, "%s row %d", impl.name, i)
			require.Equal(t, v.pk, strings.ToUpper(hex.EncodeToString(pk[:])), "%s row %d: public key", impl.name, i)
			sig, ok := impl.sign(sk, msg, aux)
			require.True(t, ok, "%s row %d", impl.name, i)
			require.Equal(t, v.sig, strings.ToUpper(hex.EncodeToString(sig[:])), "%s row %d: signature", impl.name, i)
			sig, ok = impl.sign(sk, msg, nil)
			require.True(t, ok, "%s row %d", impl.name, i)
			require.True(t, verifyBtcec(&pk, msg, &sig), "%s row %d: own nonce", impl.name, i)
			require.True(t, verifySchnorr(&pk, msg, &sig), "%s row %d: own nonce", impl.name, i)
		}
	}
}

// TestInvalidSecretKeys: zero and keys not below the curve order are
// refused by both signers, by Sign and by ParseSecretKey, never reduced to
// another key.
func TestInvalidSecretKeys(t *testing.T) {
	t.Parallel()
	for _, k := range []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141", // the order
		"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364142",
		"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
	} {
		var sk, msg [32]byte
		require.True(t, decodeHexInto(sk[:], k))
		_, ok := schnorrPubKey(&sk)
		require.False(t, ok, k)
		_, ok = pubKeyBtcec(&sk)
		require.False(t, ok, k)
		_, ok = signSchnorr(&sk, &msg, nil)
		require.False(t, ok, k)
		_, ok = signBtcec(&sk, &msg, nil)
		require.False(t, ok, k)
		ev := Event{Kind: 1}
		require.EqualError(t, ev.Sign(sk[:]), "sign event: invalid secret key")
		_, err := ParseSecretKey(k)
		require.Error(t, err, k)
	}
	// One below the order is the largest valid key.
	_, err := ParseSecretKey("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364140")
	require.NoError(t, err)
}

// randomSigned returns an event of random content signed by a new key.
func randomSigned(t testing.TB) Event {
	t.Helper()
	ev := Event{CreatedAt: 1700000000, Kind: 9, Content: rand.Text(), Tags: Tags{{"h", "x"}}}
	require.NoError(t, ev.Sign(GenerateKey()))
	return ev
}

// flipHexDigit returns s with the hex digit at i changed to another digit of
// the same case.
func flipHexDigit(s string, i int) string {
	b := []byte(s)
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

func TestVerifySignatureRoundTripAndTampering(t *testing.T) {
	t.Parallel()
	rounds := 50
	if raceEnabled {
		rounds = 10
	}
	var pos [1]byte
	for range rounds {
		ev := randomSigned(t)
		require.True(t, ev.VerifySignature())
		require.Equal(t, strings.ToLower(ev.Sig), ev.Sig)

		_, _ = rand.Read(pos[:])
		for name, bad := range map[string]Event{
			"id":     {ID: flipHexDigit(ev.ID, int(pos[0])%64), PubKey: ev.PubKey, Sig: ev.Sig},
			"pubkey": {ID: ev.ID, PubKey: flipHexDigit(ev.PubKey, int(pos[0])%64), Sig: ev.Sig},
			"sig r":  {ID: ev.ID, PubKey: ev.PubKey, Sig: flipHexDigit(ev.Sig, int(pos[0])%64)},
			"sig s":  {ID: ev.ID, PubKey: ev.PubKey, Sig: flipHexDigit(ev.Sig, 64+int(pos[0])%64)},
		} {
			require.False(t, bad.VerifySignature(), "tampered %s of %+v", name, ev)
		}
		other := randomSigned(t)
		swapped := ev
		swapped.Sig = other.Sig
		require.False(t, swapped.VerifySignature(), "another event's signature")
		swapped = ev
		swapped.PubKey = other.PubKey
		require.False(t, swapped.VerifySignature(), "another author's key")
	}
}

// TestVerifySignatureMalformedHex keeps the contract of VerifySignature:
// any field that is not exactly its length of hex digits is false, never a
// panic; upper-case hex is accepted as it always was.
func TestVerifySignatureMalformedHex(t *testing.T) {
	t.Parallel()
	ev := randomSigned(t)
	require.True(t, (&Event{ID: strings.ToUpper(ev.ID), PubKey: strings.ToUpper(ev.PubKey), Sig: strings.ToUpper(ev.Sig)}).VerifySignature())

	bad := func(s string) []string {
		return []string{
			"",
			s[:len(s)-1], // odd length
			s[:len(s)-2], // one byte short
			s + "00",     // one byte long
			s + "0",      // odd and long
			"g" + s[1:],  // not hex
			s[:10] + " " + s[11:],
			"0x" + s[2:],
			s[:len(s)-1] + "\x00",
			strings.Repeat("é", len(s)/2),
		}
	}
	for _, id := range bad(ev.ID) {
		require.False(t, (&Event{ID: id, PubKey: ev.PubKey, Sig: ev.Sig}).VerifySignature(), "id %q", id)
	}
	for _, pk := range bad(ev.PubKey) {
		require.False(t, (&Event{ID: ev.ID, PubKey: pk, Sig: ev.Sig}).VerifySignature(), "pubkey %q", pk)
	}
	for _, sig := range bad(ev.Sig) {
		require.False(t, (&Event{ID: ev.ID, PubKey: ev.PubKey, Sig: sig}).VerifySignature(), "sig %q", sig)
	}
}

func TestDecodeHexInto(t *testing.T) {
	t.Parallel()
	var b [4]byte
	require.True(t, decodeHexInto(b[:], "00fFa9B1"))
	require.Equal(t, [4]byte{0x00, 0xff, 0xa9, 0xb1}, b)
	for _, s := range []string{"", "00ffa9b", "00ffa9b1c", "00ffa9b10", "00ffa9bg", "/0ffa9b1", ":0ffa9b1", "@0ffa9b1", "G0ffa9b1", "`0ffa9b1"} {
		require.False(t, decodeHexInto(b[:], s), "%q", s)
	}
}

func BenchmarkVerifySignature(b *testing.B) {
	b.Logf("verifier: %s", SignatureVerifier)
	evs := make([]Event, 64)
	for i := range evs {
		evs[i] = randomSigned(b)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if !evs[i%len(evs)].VerifySignature() {
			b.Fatal("valid signature rejected")
		}
		i++
	}
}

func BenchmarkVerifySignatureParallel(b *testing.B) {
	evs := make([]Event, 64)
	for i := range evs {
		evs[i] = randomSigned(b)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if !evs[i%len(evs)].VerifySignature() {
				b.Error("valid signature rejected")
				return
			}
			i++
		}
	})
}

// BenchmarkSign signs an event with the signer this build selected
// (SignatureVerifier): the relay's follow-ups and the bench tools' load.
func BenchmarkSign(b *testing.B) {
	sk := GenerateKey()
	ev := Event{CreatedAt: 1700000000, Kind: 9, Content: "hello", Tags: Tags{{"h", "x"}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := ev.Sign(sk); err != nil {
			b.Fatal(err)
		}
	}
}
