package windowbench

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"

	"github.com/buzz-relay/buzz/internal/event"
)

// authorCount is the number of fixture authors (keys derived from a fixed
// seed, so two runs sign the same events).
const authorCount = 64

// author is a secret key with its public key computed once.
type author struct {
	sk     []byte
	priv   *btcec.PrivateKey
	pubkey string // lowercase hex
	pub    []byte
}

// newAuthor derives an author from a name.
func newAuthor(name string) author {
	s := sha256.Sum256([]byte("windowbench-author-" + name))
	priv, _ := btcec.PrivKeyFromBytes(s[:])
	pub := schnorr.SerializePubKey(priv.PubKey())
	return author{sk: s[:], priv: priv, pubkey: hex.EncodeToString(pub), pub: pub}
}

// authors returns n fixture authors.
func authors(n int) []author {
	out := make([]author, n)
	for i := range out {
		out[i] = newAuthor(strconv.Itoa(i))
	}
	return out
}

// stamp fills ev's pubkey and id (the id is all a child's tags need; the
// signature comes later, on every core).
func (a *author) stamp(ev *event.Event) (id [32]byte) {
	ev.PubKey = a.pubkey
	id = sha256.Sum256(ev.Serialize())
	ev.ID = hex.EncodeToString(id[:])
	return id
}

// sign returns the BIP-340 signature of id, without the library's
// verification of its own result (the fixture signs a million and a half;
// TestFixture verifies a sample).
func (a *author) sign(id [32]byte) ([64]byte, error) {
	sig, err := schnorr.Sign(a.priv, id[:], schnorr.FastSign())
	if err != nil {
		return [64]byte{}, err
	}
	var out [64]byte
	copy(out[:], sig.Serialize())
	return out, nil
}

// signEvent fills ev's pubkey, id and signature, as event.Sign does, with
// the key computed once.
func (a *author) signEvent(ev *event.Event) error {
	id := a.stamp(ev)
	sig, err := a.sign(id)
	if err != nil {
		return err
	}
	ev.Sig = hex.EncodeToString(sig[:])
	return nil
}

// vocabulary is 186 distinct pronounceable words of 4 to 9 letters.
var vocabulary = func() []string {
	cons, vows := "bdfgklmnprstvz", "aeiou"
	var syl []string
	for _, c := range cons {
		for _, v := range vows {
			syl = append(syl, string(c)+string(v))
		}
	}
	words := make([]string, 186)
	for i := range words {
		w := syl[i%len(syl)] + syl[(i*7+3)%len(syl)]
		if i%3 == 0 {
			w += syl[(i*11+5)%len(syl)]
		}
		words[i] = w + string("nrstl"[i%5]) + strconv.Itoa(i/len(syl))
	}
	return words
}()

// content returns words of the vocabulary until about n bytes.
func content(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 12)
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()
}
