package main

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// Workload shape of the performance targets (docs/PERFORMANCE.md).
const (
	vocabularySize = 186
	wordsPerEvent  = 12
	rareEvery      = 1000
	rareWord       = "quixotically"
)

// vocabulary returns vocabularySize distinct two-syllable words.
func vocabulary() []string {
	cons := "bdfgklmnprstvz"
	vows := "aeiou"
	syl := make([]string, 0, len(cons)*len(vows))
	for _, c := range cons {
		for _, v := range vows {
			syl = append(syl, string(c)+string(v))
		}
	}
	words := make([]string, vocabularySize)
	for i := range words {
		words[i] = syl[i%len(syl)] + syl[(i/len(syl))*13+5] + "n"
	}
	return words
}

// newUUID returns a random version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// workload is the pre-signed data of one run.
type workload struct {
	keys    [][]byte
	pubkeys []string
	kind    int
	channel string // "" when kind 1 is used
}

func newWorkload(authors int) *workload {
	w := &workload{kind: event.KindStreamMessage}
	for range authors {
		sk := event.GenerateKey()
		w.keys = append(w.keys, sk)
		w.pubkeys = append(w.pubkeys, event.PubKey(sk))
	}
	return w
}

// job is one pre-signed event and the author that signed it.
type job struct {
	ev     event.Event
	author int
}

// sign builds n events, event i signed by authorOf(i), and signs them on
// every core. seed makes the content reproducible.
func (w *workload) sign(n int, seed uint64, authorOf func(i int) int) []job {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	vocab := vocabulary()
	now := time.Now().Unix()
	jobs := make([]job, n)
	var words [wordsPerEvent]string
	for i := range jobs {
		a := authorOf(i)
		for k := range words {
			words[k] = vocab[rng.IntN(len(vocab))]
		}
		if i%rareEvery == rareEvery/2 {
			words[rng.IntN(len(words))] = rareWord
		}
		ev := event.Event{PubKey: w.pubkeys[a], CreatedAt: now, Kind: w.kind, Content: strings.Join(words[:], " ")}
		if w.channel != "" {
			ev.Tags = append(ev.Tags, event.Tag{"h", w.channel})
		}
		ev.Tags = append(ev.Tags, event.Tag{"p", w.pubkeys[rng.IntN(len(w.pubkeys))]})
		if i > 0 && rng.IntN(2) == 0 {
			ev.Tags = append(ev.Tags, event.Tag{"e", jobs[rng.IntN(i)].ev.ID})
		}
		ev.ID = ev.ComputeID() // later events reference it before it is signed
		jobs[i] = job{ev: ev, author: a}
	}
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for g := range workers {
		wg.Go(func() {
			for i := g; i < n; i += workers {
				_ = jobs[i].ev.Sign(w.keys[jobs[i].author]) // keys are valid by construction
			}
		})
	}
	wg.Wait()
	return jobs
}
