package negentropy_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	gonegentropy "github.com/nbd-wtf/go-nostr/nip77/negentropy"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy/storage/vector"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/negentropy"
)

// record is one item of a test set.
type record struct {
	ts uint64
	id [negentropy.IDSize]byte
}

func randomRecords(n int, rng *mrand.Rand, spread uint64) []record {
	out := make([]record, n)
	for i := range out {
		out[i].ts = 1_700_000_000 + rng.Uint64N(spread)
		_, _ = rand.Read(out[i].id[:])
	}
	return out
}

func serverSet(recs []record) *negentropy.Set {
	items := make([]negentropy.Item, len(recs))
	for i, r := range recs {
		items[i] = negentropy.Item{Timestamp: r.ts, ID: r.id}
	}
	return negentropy.NewSet(items)
}

// outcome is what the independent client learnt, and how.
type outcome struct {
	have, need []string // ids the client has and the relay lacks; ids it lacks
	rounds     int
	up, down   int // hex bytes client → relay, relay → client
}

// reconcile runs go-nostr's negentropy as the client against Respond until
// the client is done.
func reconcile(t *testing.T, client []record, server *negentropy.Set, clientLimit, serverLimit int) outcome {
	t.Helper()
	vec := vector.New()
	for _, r := range client {
		vec.Insert(nostr.Timestamp(r.ts), hex.EncodeToString(r.id[:]))
	}
	vec.Seal()
	neg := gonegentropy.New(vec, clientLimit)
	var o outcome
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for id := range neg.Haves {
			o.have = append(o.have, id)
		}
	}()
	go func() {
		defer wg.Done()
		for id := range neg.HaveNots {
			o.need = append(o.need, id)
		}
	}()
	msg := neg.Start()
	for {
		o.rounds++
		require.Less(t, o.rounds, 10_000, "the reconciliation ends")
		o.up += len(msg)
		raw, err := hex.DecodeString(msg)
		require.NoError(t, err)
		answer, err := negentropy.Respond(server, raw, serverLimit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(answer), max(serverLimit, negentropy.MinFrameLimit), "the answer keeps to the frame limit")
		ah := hex.EncodeToString(answer)
		o.down += len(ah)
		msg, err = neg.Reconcile(ah)
		require.NoError(t, err)
		if msg == "" {
			break
		}
	}
	wg.Wait()
	return o
}

func ids(recs []record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = hex.EncodeToString(r.id[:])
	}
	return out
}

func sorted(s []string) []string {
	s = append([]string{}, s...)
	slices.Sort(s)
	return slices.Compact(s)
}

// TestReconcile reconciles random sets against go-nostr's negentropy as
// the client: the client must learn exactly the ids only it has and the
// ids only the relay has.
func TestReconcile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                           string
		common, onlyClient, onlyServer int
		spread                         uint64
		clientLimit, serverLimit       int
	}{
		{"BothEmpty", 0, 0, 0, 1000, 0, 0},
		{"ClientEmpty", 0, 0, 500, 1000, 0, 0},
		{"ServerEmpty", 0, 500, 0, 1000, 0, 0},
		{"Equal", 5000, 0, 0, 100_000, 0, 0},
		{"Disjoint", 0, 3000, 3000, 100_000, 0, 0},
		{"OneEach", 1000, 1, 1, 100_000, 0, 0},
		{"SameTimestamps", 3000, 40, 40, 3, 0, 0},
		{"SmallFrames", 3000, 800, 800, 50, 4096, 4096},
		{"SmallServerFrames", 20_000, 500, 500, 1_000_000, 0, 4096},
		{"OnePercent100k", 98_000, 1000, 1000, 10_000_000, 0, 256 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := mrand.New(mrand.NewPCG(uint64(len(tc.name)), uint64(tc.common)))
			common := randomRecords(tc.common, rng, tc.spread)
			onlyClient := randomRecords(tc.onlyClient, rng, tc.spread)
			onlyServer := randomRecords(tc.onlyServer, rng, tc.spread)
			client := append(slices.Clone(common), onlyClient...)
			server := serverSet(append(slices.Clone(common), onlyServer...))
			o := reconcile(t, client, server, tc.clientLimit, tc.serverLimit)
			require.Equal(t, sorted(ids(onlyClient)), sorted(o.have), "ids only the client has")
			require.Equal(t, sorted(ids(onlyServer)), sorted(o.need), "ids only the relay has")
			t.Logf("%s: %d rounds, %d hex bytes up, %d down", tc.name, o.rounds, o.up, o.down)
		})
	}
}

// TestFingerprint compares the fingerprint with go-nostr's for sets of
// every small size and a large one.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	rng := mrand.New(mrand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 17, 128, 1000} {
		recs := randomRecords(n, rng, 10)
		vec := vector.New()
		for _, r := range recs {
			vec.Insert(nostr.Timestamp(r.ts), hex.EncodeToString(r.id[:]))
		}
		vec.Seal()
		s := serverSet(recs)
		fp := s.Fingerprint(0, s.Len())
		require.Equal(t, vec.Fingerprint(0, vec.Size()), hex.EncodeToString(fp[:]), "n=%d", n)
	}
}

// TestRespondRefuses: a message of another version or a malformed one is
// an error, never a panic or an answer.
func TestRespondRefuses(t *testing.T) {
	t.Parallel()
	s := serverSet(randomRecords(100, mrand.New(mrand.NewPCG(3, 4)), 10))
	_, err := negentropy.Respond(s, []byte{0x62}, 0)
	require.ErrorIs(t, err, negentropy.ErrVersion)
	for _, msg := range [][]byte{
		{},
		{negentropy.Version, 0x80},             // truncated varint
		{negentropy.Version, 0x00, 33},         // id prefix over 32 bytes
		{negentropy.Version, 0x00, 0x00, 0x07}, // unknown mode
		{negentropy.Version, 0x00, 0x00, 0x01, 1, 2, 3},                                        // short fingerprint
		{negentropy.Version, 0x00, 0x00, 0x02, 0x05, 1},                                        // id list longer than the message
		{negentropy.Version, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // varint over 64 bits
	} {
		_, err := negentropy.Respond(s, msg, 0)
		require.ErrorIs(t, err, negentropy.ErrMalformed, fmt.Sprintf("%x", msg))
	}
	answer, err := negentropy.Respond(s, []byte{negentropy.Version}, 0)
	require.NoError(t, err)
	require.Equal(t, []byte{negentropy.Version}, answer, "an empty message is answered with none")
}

// FuzzRespond: Respond never panics, and never answers past the frame limit.
func FuzzRespond(f *testing.F) {
	rng := mrand.New(mrand.NewPCG(5, 6))
	s := serverSet(randomRecords(300, rng, 20))
	f.Add([]byte{negentropy.Version, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{negentropy.Version, 0x00, 0x00, 0x02, 0x00})
	f.Add([]byte{negentropy.Version, 0x05, 0x02, 0xab, 0xcd, 0x00, 0x00, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, msg []byte) {
		answer, err := negentropy.Respond(s, msg, negentropy.MinFrameLimit)
		if err == nil && len(answer) > negentropy.MinFrameLimit {
			t.Fatalf("answer of %d bytes", len(answer))
		}
	})
}
