package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// fleet is the authenticated sockets of a run. Worker w publishes for its own
// authors, each over a socket authenticated (NIP-42) as that author, because
// a connection may only publish its own pubkey's events. All of worker w's
// sockets go to relay w%len(relays): the busy connections are spread
// round-robin over the processes.
type fleet struct {
	authors [][]int                // worker → its authors
	sockets []map[int]*client.Conn // worker → author → socket
	all     []*client.Conn
}

// workerAuthors splits authors over conns workers: author a goes to worker
// a%conns; with fewer authors than workers, worker w shares author w%authors.
func workerAuthors(conns, authors int) [][]int {
	out := make([][]int, conns)
	if authors < conns {
		for w := range out {
			out[w] = []int{w % authors}
		}
		return out
	}
	for a := range authors {
		out[a%conns] = append(out[a%conns], a)
	}
	return out
}

// authorOf is the author of job i: its worker is i%conns.
func (f *fleet) authorOf(i int) int {
	w := i % len(f.authors)
	as := f.authors[w]
	return as[(i/len(f.authors))%len(as)]
}

func dialFleet(ctx context.Context, cfg config, wl *workload) (*fleet, error) {
	f := &fleet{authors: workerAuthors(cfg.conns, cfg.authors)}
	for w, as := range f.authors {
		m := map[int]*client.Conn{}
		relay := relayOf(cfg.relays, w)
		for _, a := range as {
			c, err := client.Dial(ctx, relay, wl.keys[a])
			if err != nil {
				f.close()
				return nil, fmt.Errorf("connect as author %d to %s: %w", a, relay, err)
			}
			m[a] = c
			f.all = append(f.all, c)
		}
		f.sockets = append(f.sockets, m)
	}
	return f, nil
}

// relayOf is the relay of worker (or publisher) w: round-robin over relays.
func relayOf(relays []string, w int) string { return relays[w%len(relays)] }

func (f *fleet) close() {
	for _, c := range f.all {
		_ = c.Close()
	}
}

// setupLine reports the channel and the pre-signing.
type setupLine struct {
	Phase          string   `json:"phase"`
	Relays         []string `json:"relays"`
	Conns          int      `json:"conns"`
	Sockets        int      `json:"sockets"`
	Authors        int      `json:"authors"`
	Kind           int      `json:"kind"`
	Channel        string   `json:"channel,omitempty"`
	Note           string   `json:"note,omitempty"`
	PresignSeconds float64  `json:"presign_seconds"`
}

// ingestLine is one ingest phase's figures.
type ingestLine struct {
	Phase         string   `json:"phase"`
	Conns         int      `json:"conns"`
	Sockets       int      `json:"sockets,omitempty"`
	Inflight      int      `json:"inflight"`
	Events        int      `json:"events"`
	Seconds       float64  `json:"seconds"`
	EventsPerSec  float64  `json:"events_per_sec"`
	OKP50         float64  `json:"ok_p50_ms"`
	OKP90         float64  `json:"ok_p90_ms"`
	OKP99         float64  `json:"ok_p99_ms"`
	OKMax         float64  `json:"ok_max_ms"`
	Rejected      int      `json:"rejected"`
	RejectedFirst []string `json:"rejected_messages,omitempty"`
	Errors        int      `json:"errors"`
	FirstError    string   `json:"first_error,omitempty"`
	Truncated     bool     `json:"truncated,omitempty"`
	// PerRelay counts the answered EVENTs (accepted or rejected) per relay.
	PerRelay map[string]int    `json:"per_relay"`
	CPU      map[string]cpuUse `json:"cpu,omitempty"`
}

// reqLine is one REQ shape's figures.
type reqLine struct {
	Phase         string            `json:"phase"`
	Shape         string            `json:"shape"`
	Conns         int               `json:"conns"`
	Limit         int               `json:"limit"`
	Queries       int               `json:"queries"`
	Seconds       float64           `json:"seconds"`
	QPS           float64           `json:"qps"`
	AvgEvents     float64           `json:"avg_events"`
	EOSEP50       float64           `json:"eose_p50_ms"`
	EOSEP99       float64           `json:"eose_p99_ms"`
	EOSEMax       float64           `json:"eose_max_ms"`
	Rejected      int               `json:"rejected"`
	RejectedFirst []string          `json:"rejected_messages,omitempty"`
	Errors        int               `json:"errors"`
	FirstError    string            `json:"first_error,omitempty"`
	CPU           map[string]cpuUse `json:"cpu,omitempty"`
}

type summaryLine struct {
	Phase       string                  `json:"phase"`
	WallSeconds float64                 `json:"wall_seconds"`
	Kind        int                     `json:"kind"`
	Ingest      map[string]float64      `json:"events_per_sec,omitempty"`
	ReqQPS      map[string]float64      `json:"req_qps,omitempty"`
	Fanout      *fanoutSummary          `json:"fanout,omitempty"`
	Idle        *idleSummary            `json:"idle,omitempty"`
	Abuse       map[string]abuseSummary `json:"abuse,omitempty"`
	Truncated   bool                    `json:"truncated,omitempty"`
}

// idleSummary is the idle phase's headline in the summary line.
type idleSummary struct {
	Connected int     `json:"connected"`
	RSSMiB    float64 `json:"rss_after_mib,omitempty"`
	PerConn   float64 `json:"kib_per_conn,omitempty"`
}

// fanoutSummary is the fanout phase's headline in the summary line.
type fanoutSummary struct {
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	Missing int     `json:"missing"`
}

// needsFleet reports whether a phase uses the ingest sockets and workload.
func needsFleet(phases []string) bool {
	for _, p := range phases {
		if p != "fanout" && p != "idle" && p != "abuse" {
			return true
		}
	}
	return false
}

// bench runs the phases in order. The ingest sockets and their workload
// are set up (and reported in the setup line) only when an ingest or REQ
// phase runs; the fanout and idle phases bring their own sockets.
func bench(ctx context.Context, cfg config, out io.Writer) error {
	start := time.Now()
	sum := summaryLine{Phase: "summary", Kind: event.KindStreamMessage, Ingest: map[string]float64{}, ReqQPS: map[string]float64{}}
	var run *fleetRun
	if needsFleet(cfg.phases) {
		var err error
		if run, err = setupFleet(ctx, cfg, out); err != nil {
			return err
		}
		defer run.f.close()
		sum.Kind = run.wl.kind
	}
	var eIDs []string
	for _, p := range cfg.phases {
		switch p {
		case "ingest":
			f := run.f
			line := runIngest(ctx, cfg, run.sets[p], func(ctx context.Context, w int, j job) (bool, string, error) {
				return f.sockets[w][j.author].Publish(ctx, j.ev)
			})
			line.Phase, line.Sockets = p, len(f.all)
			sum.Ingest[p], sum.Truncated = line.EventsPerSec, sum.Truncated || line.Truncated
			writeLine(out, line)
		case "http-ingest":
			line := runIngest(ctx, cfg, run.sets[p], httpPublisher(cfg, run.wl))
			line.Phase = p
			sum.Ingest[p], sum.Truncated = line.EventsPerSec, sum.Truncated || line.Truncated
			writeLine(out, line)
		case "req":
			if eIDs == nil {
				eIDs = referencedIDs(run.sets)
			}
			t := cfg.targets
			if t == nil {
				t = &reqTargets{Kind: run.wl.kind, Authors: run.wl.pubkeys, E: eIDs, P: run.wl.pubkeys}
			}
			shapes := []string{"kinds", "authors", "#e", "#p"}
			for _, w := range cfg.searchWords {
				shapes = append(shapes, "search:"+w)
			}
			for _, shape := range shapes {
				line := runReq(ctx, cfg, run.f, shape, filterFor(shape, t))
				sum.ReqQPS[shape] = line.QPS
				writeLine(out, line)
			}
		case "fanout":
			line, err := runFanout(ctx, cfg)
			if err != nil {
				return err
			}
			sum.Fanout = &fanoutSummary{P50: line.P50, P99: line.P99, Missing: line.Missing}
			sum.Truncated = sum.Truncated || line.Truncated
			writeLine(out, line)
		case "abuse":
			sum.Abuse = map[string]abuseSummary{}
			if err := runAbuse(ctx, cfg, out, sum.Abuse); err != nil {
				return err
			}
		case "idle":
			line, err := runIdle(ctx, cfg)
			if err != nil {
				return err
			}
			sum.Idle = &idleSummary{Connected: line.Connected, RSSMiB: line.RSSAfterMiB, PerConn: line.PerConn}
			sum.Truncated = sum.Truncated || line.Truncated
			writeLine(out, line)
		}
	}
	sum.WallSeconds = round3(time.Since(start).Seconds())
	sum.Truncated = sum.Truncated || ctx.Err() != nil
	writeLine(out, sum)
	return nil
}

// fleetRun is the ingest sockets, their workload and the pre-signed
// events of each ingest phase.
type fleetRun struct {
	f    *fleet
	wl   *workload
	sets map[string][]job
}

// setupFleet dials the ingest sockets, creates the channel, pre-signs the
// ingest phases' events and writes the setup line.
func setupFleet(ctx context.Context, cfg config, out io.Writer) (*fleetRun, error) {
	wl := newWorkload(cfg.authors)
	f, err := dialFleet(ctx, cfg, wl)
	if err != nil {
		return nil, err
	}
	setup := setupLine{Phase: "setup", Relays: cfg.relays, Conns: cfg.conns, Sockets: len(f.all), Authors: cfg.authors}
	if cfg.kind == event.KindNote {
		wl.kind = event.KindNote
	} else if err := createChannel(ctx, f.sockets[0][0], wl, &setup); err != nil {
		f.close()
		return nil, err
	}
	t0 := time.Now()
	sets := map[string][]job{}
	for i, p := range cfg.phases {
		if p == "ingest" || p == "http-ingest" {
			sets[p] = wl.sign(cfg.events, uint64(i+1), f.authorOf)
		}
	}
	setup.Kind, setup.Channel, setup.PresignSeconds = wl.kind, wl.channel, round3(time.Since(t0).Seconds())
	writeLine(out, setup)
	return &fleetRun{f: f, wl: wl, sets: sets}, nil
}

// createChannel publishes the kind 9007 of the first author and uses its
// channel; when the relay refuses it, the run falls back to kind 1.
func createChannel(ctx context.Context, c *client.Conn, wl *workload, setup *setupLine) error {
	id, refusal, err := publishChannel(ctx, c, wl.keys[0])
	if err != nil {
		return err
	}
	if refusal != "" {
		wl.kind = event.KindNote
		setup.Note = "relay refused kind 9007 (" + refusal + "); falling back to kind 1 without a channel"
		return nil
	}
	wl.channel = id
	return nil
}

// publishChannel creates an open channel with a kind 9007 signed by sk over
// c and returns its id, or the relay's message when it refused it.
func publishChannel(ctx context.Context, c *client.Conn, sk []byte) (id, refusal string, err error) {
	id = newUUID()
	ev := event.Event{
		CreatedAt: time.Now().Unix(),
		Kind:      event.KindCreateGroup,
		Tags:      event.Tags{{"h", id}, {"name", "bench-" + strconv.FormatInt(time.Now().Unix(), 10)}},
	}
	if err := ev.Sign(sk); err != nil {
		return "", "", err
	}
	ok, msg, err := c.Publish(ctx, ev)
	if err != nil {
		return "", "", fmt.Errorf("create channel: %w", err)
	}
	if !ok {
		return "", msg, nil
	}
	return id, "", nil
}

// runIngest publishes jobs: worker w takes jobs w, w+conns, … with
// cfg.inflight of them in flight at once.
func runIngest(ctx context.Context, cfg config, jobs []job, publish func(ctx context.Context, w int, j job) (bool, string, error)) ingestLine {
	type result struct {
		lat  []time.Duration
		rej  rejections
		errs int
		err  error
	}
	results := make([]result, cfg.conns*cfg.inflight)
	before := sampleCPU(cfg.pids)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.conns {
		var next atomic.Int64
		for g := range cfg.inflight {
			r := &results[w*cfg.inflight+g]
			wg.Go(func() {
				for ctx.Err() == nil {
					i := w + int(next.Add(1)-1)*cfg.conns
					if i >= len(jobs) {
						return
					}
					t := time.Now()
					ok, msg, err := publish(ctx, w, jobs[i])
					switch {
					case err != nil && ctx.Err() != nil:
						return
					case err != nil:
						r.errs++
						if r.err == nil {
							r.err = err
						}
					case !ok:
						r.rej.add(msg)
					default:
						r.lat = append(r.lat, time.Since(t))
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	line := ingestLine{Conns: cfg.conns, Inflight: cfg.inflight, Seconds: round3(elapsed.Seconds()), Truncated: ctx.Err() != nil}
	line.CPU = cpuSince(cfg.pids, before)
	line.PerRelay = map[string]int{}
	var lat []time.Duration
	var rej rejections
	for k, r := range results {
		lat = append(lat, r.lat...)
		rej.merge(r.rej)
		line.PerRelay[relayOf(cfg.relays, k/cfg.inflight)] += len(r.lat) + r.rej.n
		line.Errors += r.errs
		if line.FirstError == "" && r.err != nil {
			line.FirstError = r.err.Error()
		}
	}
	line.Events = len(lat) + rej.n
	line.EventsPerSec = round1(float64(line.Events) / elapsed.Seconds())
	s := summarise(lat)
	line.OKP50, line.OKP90, line.OKP99, line.OKMax = s.P50, s.P90, s.P99, s.Max
	line.Rejected, line.RejectedFirst = rej.n, rej.first
	return line
}

// httpPublisher posts each job to /events with its author's NIP-98 header,
// worker w on the HTTP side of relay w%len(relays).
func httpPublisher(cfg config, wl *workload) func(ctx context.Context, w int, j job) (bool, string, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.conns * cfg.inflight}}
	clients := make([][]*client.HTTP, len(cfg.relays)) // relay → author → client
	for i, relay := range cfg.relays {
		base := httpBase(relay)
		for _, sk := range wl.keys {
			clients[i] = append(clients[i], &client.HTTP{BaseURL: base, SK: sk, Client: hc})
		}
	}
	return func(ctx context.Context, w int, j job) (bool, string, error) {
		ok, msg, err := clients[w%len(cfg.relays)][j.author].Publish(ctx, j.ev)
		var refused *client.RefusedError
		if errors.As(err, &refused) {
			return false, refused.Error(), nil
		}
		return ok, msg, err
	}
}

// httpBase is the http(s) base URL of a ws(s) relay URL.
func httpBase(relay string) string {
	base := "http://" + strings.TrimPrefix(relay, "ws://")
	if strings.HasPrefix(relay, "wss://") {
		base = "https://" + strings.TrimPrefix(relay, "wss://")
	}
	return strings.TrimSuffix(base, "/")
}

// referencedIDs lists the ids the workload's e tags point at.
func referencedIDs(sets map[string][]job) []string {
	var ids []string
	for _, jobs := range sets {
		for _, j := range jobs {
			if e := j.ev.Tags.First("e"); e != nil {
				ids = append(ids, e.Value())
			}
		}
	}
	return ids
}

// reqLimit is the limit of every REQ shape (P3, docs/PERFORMANCE.md).
const reqLimit = 50

// filterFor returns a generator of the shape's filters, drawing values from
// t. Every shape names t's kind, so the relay's p-gate lets it through.
func filterFor(shape string, t *reqTargets) func(rng *rand.Rand) event.Filter {
	limit := reqLimit
	pick := func(rng *rand.Rand, vs []string) string {
		if len(vs) == 0 {
			return strings.Repeat("0", 64) // matches nothing
		}
		return vs[rng.IntN(len(vs))]
	}
	return func(rng *rand.Rand) event.Filter {
		f := event.Filter{Kinds: []int{t.Kind}, Limit: &limit}
		switch shape {
		case "authors":
			f.Authors = []string{pick(rng, t.Authors)}
		case "#e":
			f.Tags = map[string][]string{"e": {pick(rng, t.E)}}
		case "#p":
			f.Tags = map[string][]string{"p": {pick(rng, t.P)}}
		default:
			if w, ok := strings.CutPrefix(shape, "search:"); ok {
				f.Search = &w // NIP-50, ranked by the relay's window
			}
		}
		return f
	}
}

// runReq keeps one REQ in flight on each of conns sockets for cfg.reqDuration.
func runReq(ctx context.Context, cfg config, f *fleet, shape string, gen func(*rand.Rand) event.Filter) reqLine {
	type result struct {
		lat    []time.Duration
		events int
		rej    rejections
		errs   int
		err    error
	}
	results := make([]result, cfg.conns)
	before := sampleCPU(cfg.pids)
	sctx, cancel := context.WithTimeout(ctx, cfg.reqDuration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.conns {
		c := f.sockets[w][f.authors[w][0]]
		r := &results[w]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for sctx.Err() == nil {
				t := time.Now()
				evs, err := c.Query(sctx, gen(rng))
				var refused *client.RefusedError
				switch {
				case err != nil && sctx.Err() != nil:
					return
				case errors.As(err, &refused):
					r.rej.add(refused.Message)
				case err != nil:
					r.errs++
					if r.err == nil {
						r.err = err
					}
					return // the socket is gone
				default:
					r.lat = append(r.lat, time.Since(t))
					r.events += len(evs)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	line := reqLine{Phase: "req", Shape: shape, Conns: cfg.conns, Limit: reqLimit, Seconds: round3(elapsed.Seconds())}
	line.CPU = cpuSince(cfg.pids, before)
	var lat []time.Duration
	var rej rejections
	events := 0
	for _, r := range results {
		lat = append(lat, r.lat...)
		events += r.events
		rej.merge(r.rej)
		line.Errors += r.errs
		if line.FirstError == "" && r.err != nil {
			line.FirstError = r.err.Error()
		}
	}
	line.Queries = len(lat)
	line.QPS = round1(float64(len(lat)) / elapsed.Seconds())
	if len(lat) > 0 {
		line.AvgEvents = round1(float64(events) / float64(len(lat)))
	}
	s := summarise(lat)
	line.EOSEP50, line.EOSEP99, line.EOSEMax = s.P50, s.P99, s.Max
	line.Rejected, line.RejectedFirst = rej.n, rej.first
	return line
}
