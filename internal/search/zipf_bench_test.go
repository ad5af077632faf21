package search_test

// The one-community search figures (target P4 of docs/PERFORMANCE.md) and the concurrency
// on their own dataset: 1,000,000 kind 9 events in ONE community,
// 12 words each drawn from a 5,000-word Zipf vocabulary. Not part of
// `go test ./...` (a benchmark): run it with
//
//	go test -run '^$' -bench SearchZipf -benchtime 1x -timeout 60m ./internal/search
//
// With BUZZ_BENCH_ZIPF_DATABASE_URL the dataset is kept in that database
// between runs. It reports:
//   - one FTS page (per_page 100, the WebSocket shape) for a term with at
//     most 1,000 matches and one with at most 15,000, warm cache, p50/p95
//     (never above 25 ms and 150 ms);
//   - WebSocket REQ→EOSE with limit 20 for the same terms;
//   - 50 concurrent search REQs for the top word (in most rows),
//     each timed to its EOSE (bound 16 s), and an `ids` REQ loop on another
//     connection during the burst, against the same loop on a quiet relay.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/search"
)

const (
	zipfEvents  = 1_000_000
	zipfVocab   = 5000
	zipfWords   = 12
	zipfHost    = "zipf.search.test"
	zipfDBEnv   = "BUZZ_BENCH_ZIPF_DATABASE_URL"
	zipfSamples = 200
	// zipfTopSamples is the sample count of the top word's pages.
	zipfTopSamples = 20
	zipfBurst      = 50
)

func zipfWord(i int) string { return fmt.Sprintf("z%04d", i) }

// zipfEvent returns the content and the age (seconds before the load) of
// event i; both depend only on i.
func zipfEvent(i int) (string, int64) {
	rng := rand.New(rand.NewPCG(37, uint64(i)))
	z := rand.NewZipf(rng, 1.1, 1, zipfVocab-1)
	words := make([]string, zipfWords)
	for j := range words {
		words[j] = zipfWord(int(z.Uint64()))
	}
	return strings.Join(words, " "), rng.Int64N(180 * 24 * 3600)
}

type zipfData struct {
	r         *relaytest.Relay
	community string
	channel   string
	reader    eventtest.Key
	df        []int // events containing each vocabulary word
	someID    string
}

func loadZipf(b *testing.B) *zipfData {
	d := &zipfData{reader: eventtest.NewKey(), df: make([]int, zipfVocab)}
	env := map[string]string{}
	if url := os.Getenv(zipfDBEnv); url != "" {
		env["DATABASE_URL"] = url
	}
	d.r = relaytest.Start(b, env)
	ctx := context.Background()
	pool := d.r.App.Pool()
	now := time.Now()
	require.NoError(b, pg.EnsurePartitions(ctx, pool, now.AddDate(0, -7, 0), 10))
	channel := uuid.NewSHA1(uuid.NameSpaceOID, []byte("zipf-channel"))
	d.channel = channel.String()
	for i := range zipfEvents {
		content, _ := zipfEvent(i)
		seen := map[string]bool{}
		for w := range strings.FieldsSeq(content) {
			if !seen[w] {
				seen[w] = true
				n, _ := strconv.Atoi(w[1:])
				d.df[n]++
			}
		}
	}
	var kept bool
	d.community, kept = benchCommunity(b, d.r, zipfHost, channel, zipfEvents)
	if !kept {
		began := time.Now()
		keys := make([][]byte, benchAuthors)
		for i := range keys {
			s := sha256.Sum256([]byte("buzz-zipf-author-" + strconv.Itoa(i)))
			keys[i] = s[:]
		}
		const chunk = 100_000
		for from := 0; from < zipfEvents; from += chunk {
			rows := make([][]any, chunk)
			parallelFor(chunk, func(i int) {
				content, age := zipfEvent(from + i)
				ev := event.Event{Kind: 9, Content: content, CreatedAt: now.Unix() - age,
					Tags: event.Tags{{"h", d.channel}}}
				if err := ev.Sign(keys[(from+i)%len(keys)]); err != nil {
					panic(err)
				}
				rows[i] = eventRow(d.community, channel, &ev)
			})
			copyEvents(b, pool, rows)
		}
		_, err := pool.Exec(ctx, "VACUUM ANALYZE events")
		require.NoError(b, err)
		fmt.Fprintf(os.Stderr, "zipf dataset: %d events signed and loaded in %s\n", zipfEvents, time.Since(began).Round(time.Second))
	}
	var id []byte
	require.NoError(b, pool.QueryRow(ctx, `SELECT id FROM events WHERE community_id = $1 LIMIT 1`, d.community).Scan(&id))
	d.someID = fmt.Sprintf("%x", id)
	return d
}

// termUnder returns the most frequent vocabulary word in at most n events.
func (d *zipfData) termUnder(n int) (string, int) {
	best := -1
	for w, df := range d.df {
		if df <= n && (best < 0 || df > d.df[best]) {
			best = w
		}
	}
	return zipfWord(best), d.df[best]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func BenchmarkSearchZipf(b *testing.B) {
	d := loadZipf(b)
	ctx := context.Background()
	s := search.New(search.Config{Pool: d.r.App.Pool()})
	type term struct {
		label, word string
		df          int
	}
	rare, rareDF := d.termUnder(1000)
	mid, midDF := d.termUnder(15000)
	top := zipfWord(0)
	// The top word shows whether a page's cost grows with the match
	// count; it gets fewer samples, since ranking all its matches (the
	// path before day keys) takes seconds per page.
	terms := []term{{"le1000", rare, rareDF}, {"le15000", mid, midDF}, {"top", top, d.df[0]}}
	fmt.Fprintf(os.Stderr, "zipf terms: %s in %d events, %s in %d, top word %s in %d of %d (%.0f %%)\n",
		rare, rareDF, mid, midDF, top, d.df[0], zipfEvents, 100*float64(d.df[0])/zipfEvents)
	for b.Loop() {
		for _, t := range terms {
			q := search.Query{Community: d.community, Text: t.word, Kinds: []int{9},
				Scope: search.ChannelsOrChannelLess([]string{d.channel}), PerPage: search.DefaultPerPage}
			out, err := s.Explain(ctx, q)
			require.NoError(b, err)
			fmt.Fprintf(os.Stderr, "\n== plan: %q (%d matches), page 1 of 100 ==\n%s\n", t.word, t.df, out)
			for range 5 { // warm the cache
				_, err := s.Search(ctx, q)
				require.NoError(b, err)
			}
			samples := zipfSamples
			if t.label == "top" {
				samples = zipfTopSamples
			}
			var lat latencies
			for range samples {
				began := time.Now()
				res, err := s.Search(ctx, q)
				require.NoError(b, err)
				require.Len(b, res.Hits, min(t.df, 100))
				lat = append(lat, time.Since(began))
			}
			fmt.Fprintf(os.Stderr, "FTS page %s (%d matches): p50 %.2f ms, p95 %.2f ms over %d statements\n",
				t.word, t.df, ms(lat.at(0.5)), ms(lat.at(0.95)), len(lat))
			b.ReportMetric(ms(lat.at(0.95)), "fts-"+t.label+"-p95-ms")

			w := d.r.Dial(b, zipfHost)
			w.Auth(d.reader)
			lat = lat[:0]
			for n := range samples {
				began := time.Now()
				evs, closed, eose := w.Req("z"+strconv.Itoa(n), map[string]any{"kinds": []int{9}, "search": t.word, "limit": 20})
				require.True(b, eose, closed)
				require.Len(b, evs, 20)
				lat = append(lat, time.Since(began))
			}
			fmt.Fprintf(os.Stderr, "WS REQ limit 20 %s: p50 %.2f ms, p95 %.2f ms over %d REQs\n",
				t.word, ms(lat.at(0.5)), ms(lat.at(0.95)), len(lat))
			b.ReportMetric(ms(lat.at(0.95)), "ws-"+t.label+"-p95-ms")
			w.C.CloseNow()
		}
		burst(b, d, top)
	}
}

// burst: zipfBurst connections each send one search REQ for
// the top word at the same moment; another connection runs `ids` REQs
// until the last EOSE. The same `ids` loop on the quiet relay is the
// baseline.
func burst(b *testing.B, d *zipfData, top string) {
	// idsLoop runs `ids` REQs one after another until stop is closed (or
	// zipfSamples of them when stop is nil). It never calls require: it
	// may run on its own goroutine.
	idsLoop := func(w *relaytest.WS, stop <-chan struct{}) (latencies, error) {
		var lat latencies
		for n := 0; ; n++ {
			select {
			case <-stop:
				return lat, nil
			default:
			}
			began := time.Now()
			sub := "i" + strconv.Itoa(n)
			w.Send("REQ", sub, map[string]any{"ids": []string{d.someID}})
			got := 0
			for done := false; !done; {
				msg, err := w.NextErr(60 * time.Second)
				if err != nil {
					return lat, fmt.Errorf("ids REQ %d: %w", n, err)
				}
				switch {
				case msg[0] == "EVENT" && msg[1] == sub:
					got++
				case msg[0] == "EOSE" && msg[1] == sub:
					done = true
				case msg[0] == "CLOSED" && msg[1] != sub:
					// the answer to the previous REQ's CLOSE
				default:
					return lat, fmt.Errorf("ids REQ %d: unexpected %v", n, msg)
				}
			}
			if got != 1 {
				return lat, fmt.Errorf("ids REQ %d: %d events", n, got)
			}
			lat = append(lat, time.Since(began))
			w.Send("CLOSE", sub) // a history REQ stays open for live events
			if len(lat) >= zipfSamples && stop == nil {
				return lat, nil
			}
		}
	}
	ids := d.r.Dial(b, zipfHost)
	ids.Auth(d.reader)
	quiet, err := idsLoop(ids, nil)
	require.NoError(b, err)
	fmt.Fprintf(os.Stderr, "ids REQ, quiet relay: p50 %.2f ms, p99 %.2f ms over %d REQs\n",
		ms(quiet.at(0.5)), ms(quiet.at(0.99)), len(quiet))

	conns := make([]*relaytest.WS, zipfBurst)
	for i := range conns {
		conns[i] = d.r.Dial(b, zipfHost)
		conns[i].Auth(d.reader)
	}
	stop := make(chan struct{})
	type result struct {
		lat latencies
		err error
	}
	during := make(chan result, 1)
	go func() {
		lat, err := idsLoop(ids, stop)
		during <- result{lat, err}
	}()
	took := make(latencies, zipfBurst)
	sent := make([]int, zipfBurst)
	var wg sync.WaitGroup
	began := time.Now()
	for i, w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Read with a long deadline: the REQ may legitimately take up
			// to its 15 s search deadline, beyond WS.Next's 5 s.
			w.Send("REQ", "burst", map[string]any{"search": top})
			for {
				msg, err := w.NextErr(60 * time.Second)
				if err != nil {
					panic(fmt.Sprintf("burst connection %d: %v", i, err))
				}
				if msg[0] == "EVENT" {
					sent[i]++
					continue
				}
				if msg[0] != "EOSE" {
					panic(fmt.Sprintf("burst connection %d: %v", i, msg))
				}
				took[i] = time.Since(began)
				return
			}
		}()
	}
	wg.Wait()
	close(stop)
	r := <-during
	require.NoError(b, r.err)
	busy := r.lat
	total := 0
	for _, n := range sent {
		total += n
	}
	fmt.Fprintf(os.Stderr, "burst: %d concurrent searches for %s: every one ended with EOSE, slowest after %.2f s, median %.2f s; %d events sent in all\n",
		zipfBurst, top, took.at(1).Seconds(), took.at(0.5).Seconds(), total)
	fmt.Fprintf(os.Stderr, "ids REQ during the burst: p50 %.2f ms, p99 %.2f ms over %d REQs\n",
		ms(busy.at(0.5)), ms(busy.at(0.99)), len(busy))
	b.ReportMetric(took.at(1).Seconds(), "burst-slowest-s")
	b.ReportMetric(ms(busy.at(0.99)), "ids-during-burst-p99-ms")
	b.ReportMetric(ms(quiet.at(0.99)), "ids-quiet-p99-ms")
}
