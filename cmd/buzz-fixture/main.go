// Command buzz-fixture generates the P3 dataset of spec 80 (REQ on 1M
// events) and loads it straight into a relay's PostgreSQL database, so
// that buzz-bench --phase req --req-targets can measure REQ on it.
//
// The dataset is deterministic (same flags, same rows): --communities
// communities c0.bench.local … (the first also answers to --alias, the
// host the bench connects to), each with one open channel and --authors
// authors whose keys derive from a fixed seed, and --events kind 9
// messages spread evenly over the communities and over the 30 days before
// --end. Every event is really signed (BIP-340) and carries the channel's
// h tag, one p tag naming an author of its community and, every other
// event, an e tag naming an earlier event of its community, so #p and #e
// filters have hits; its content is 12 words of a 186-word vocabulary.
//
// Rows go in with COPY, in batches of one transaction each: events (every
// real column but search_tsv, which PostgreSQL generates) and then the
// batch's event_mentions, the #p index ingest writes with each event.
// The triggers of the schema run as they do for ingest. Thread rows are
// not written: e tags without a NIP-10 marker are mentions, not replies,
// and ingest writes none for them either. Audit entries are not written:
// the chain is the relay's to build, and REQ does not read it. Then
// VACUUM ANALYZE.
//
// It prints one JSON object (hosts, counts, timings) on stdout and writes
// the values the REQ shapes draw from (community c0's authors, referenced
// event ids and mentioned pubkeys) to --targets.
//
// It only loads into a database on a unix socket or a loopback host, one
// that is migrated and does not hold the fixture's communities yet. It
// does NOT start PostgreSQL or a relay (scripts/bench-1m.sh does).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// Shape of the dataset.
const (
	hostSuffix     = ".bench.local"
	spanSeconds    = 30 * 24 * 3600
	vocabularySize = 186
	wordsPerEvent  = 12
	rareEvery      = 1000
	rareWord       = "quixotically"
	// batchRows is the events of one COPY transaction.
	batchRows = 5000
	// copiers is the concurrent COPY transactions.
	copiers = 2
	// targetIDs bounds the e values written to --targets.
	targetIDs = 4096
	// defaultEnd is 2026-01-01T00:00:00Z: the dataset does not move with
	// the clock.
	defaultEnd = 1767225600
)

type config struct {
	dbURL       string
	events      int
	communities int
	authors     int
	alias       string
	targets     string
	end         int64
	seed        uint64
	timeout     time.Duration
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("buzz-fixture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dbURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL URL of the relay's database (default $DATABASE_URL); unix socket or loopback only")
	fs.IntVar(&c.events, "events", 1000000, "kind 9 events in all, spread evenly over the communities")
	fs.IntVar(&c.communities, "communities", 10, "communities c0.bench.local …")
	fs.IntVar(&c.authors, "authors", 64, "authors per community")
	fs.StringVar(&c.alias, "alias", "", "extra host of community c0, e.g. localhost:3390 (the host buzz-bench connects to)")
	fs.StringVar(&c.targets, "targets", "", "file to write community c0's REQ values to (buzz-bench --req-targets)")
	fs.Int64Var(&c.end, "end", defaultEnd, "unix time of the newest event; events cover the 30 days before it")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of keys, tags and content")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Hour, "cap on the whole load")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.dbURL == "" {
		return c, errors.New("--database-url (or DATABASE_URL) is required")
	}
	if err := checkLocal(c.dbURL); err != nil {
		return c, err
	}
	if c.communities < 1 || c.authors < 1 || c.events < c.communities || c.timeout <= 0 {
		return c, errors.New("--communities, --authors and --timeout must be positive, --events at least --communities")
	}
	if c.alias != "" && event.IsHex64(c.alias) { // a cheap guard against swapped flags
		return c, fmt.Errorf("--alias %q is not a host", c.alias)
	}
	return c, nil
}

// checkLocal refuses a database URL with any host that is neither a unix
// socket directory nor localhost, 127.0.0.0/8 or ::1.
func checkLocal(raw string) error {
	pc, err := pgx.ParseConfig(raw)
	if err != nil {
		return errors.New("--database-url does not parse as a PostgreSQL URL")
	}
	hosts := []string{pc.Host}
	for _, f := range pc.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.HasPrefix(h, "/") || strings.EqualFold(h, "localhost") {
			continue
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			continue
		}
		return fmt.Errorf("--database-url: host %q is not a unix socket or loopback; buzz-fixture only loads local databases", h)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
		var rep report
		if rep, err = load(ctx, cfg, stderr); err == nil {
			b, _ := json.Marshal(rep)
			_, _ = stdout.Write(append(b, '\n'))
			return 0
		}
	}
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	_, _ = stderr.Write(append(b, '\n'))
	return 2
}

// report is what buzz-fixture prints.
type report struct {
	Events         int      `json:"events"`
	Mentions       int      `json:"event_mentions"`
	Communities    int      `json:"communities"`
	AuthorsEach    int      `json:"authors_per_community"`
	Hosts          []string `json:"hosts"`
	Alias          string   `json:"alias,omitempty"`
	TargetHost     string   `json:"target_host"`
	TargetEvents   int      `json:"target_events"`
	Targets        string   `json:"targets,omitempty"`
	From           int64    `json:"from"`
	To             int64    `json:"to"`
	LoadSeconds    float64  `json:"load_seconds"`
	EventsPerSec   float64  `json:"events_per_sec"`
	VacuumSeconds  float64  `json:"vacuum_analyze_seconds"`
	TotalSeconds   float64  `json:"total_seconds"`
	SignerRoutines int      `json:"signers"`
}

// targets is the --targets file: buzz-bench's reqTargets.
type targets struct {
	Kind    int      `json:"kind"`
	Authors []string `json:"authors"`
	E       []string `json:"e"`
	P       []string `json:"p"`
}

// author is a fixture key with its public key computed once.
type author struct {
	priv   *btcec.PrivateKey
	pub    []byte
	pubHex string
}

func newAuthor(seed uint64, community, i int) author {
	s := sha256.Sum256([]byte("buzz-fixture-author/" + strconv.FormatUint(seed, 10) + "/" + strconv.Itoa(community) + "/" + strconv.Itoa(i)))
	priv, _ := btcec.PrivKeyFromBytes(s[:])
	pub := schnorr.SerializePubKey(priv.PubKey())
	return author{priv: priv, pub: pub, pubHex: hex.EncodeToString(pub)}
}

// community is one fixture community as loaded.
type community struct {
	id, host, channel string
	authors           []author
}

// row is one event, signed by the signers.
type row struct {
	c       *community
	author  int
	id      [32]byte
	at      time.Time
	tags    []byte
	content string
	mention string
	sig     [64]byte
}

// vocabulary returns vocabularySize distinct pronounceable words.
func vocabulary() []string {
	cons, vows := "bdfgklmnprstvz", "aeiou"
	var syl []string
	for _, c := range cons {
		for _, v := range vows {
			syl = append(syl, string(c)+string(v))
		}
	}
	words := make([]string, vocabularySize)
	for i := range words {
		words[i] = syl[i%len(syl)] + syl[(i/len(syl)*11+i*3)%len(syl)] + "m"
	}
	return words
}

func load(ctx context.Context, cfg config, logw io.Writer) (report, error) {
	began := time.Now()
	rep := report{Communities: cfg.communities, AuthorsEach: cfg.authors, Alias: cfg.alias,
		From: cfg.end - spanSeconds + 1, To: cfg.end, SignerRoutines: runtime.NumCPU()}
	pool, err := pg.Open(ctx, cfg.dbURL, pg.PoolConfig{MaxConns: copiers + 2})
	if err != nil {
		return rep, err
	}
	defer pool.Close()
	cs, err := setup(ctx, pool, cfg)
	if err != nil {
		return rep, err
	}
	for _, c := range cs {
		rep.Hosts = append(rep.Hosts, c.host)
	}
	rep.TargetHost = cs[0].host
	if cfg.alias != "" {
		rep.TargetHost = cfg.alias
	}
	earliest := time.Unix(rep.From, 0)
	months := (time.Now().UTC().Year()-earliest.UTC().Year())*12 + int(time.Now().UTC().Month()) - int(earliest.UTC().Month()) + 1
	if err := pg.EnsurePartitions(ctx, pool, earliest, max(months, 1)); err != nil {
		return rep, fmt.Errorf("create partitions: %w", err)
	}
	fmt.Fprintf(logw, "buzz-fixture: loading %d events into %d communities\n", cfg.events, cfg.communities)
	t0 := time.Now()
	gen := make(chan []row, 4)
	tg := &targets{Kind: event.KindStreamMessage}
	genErr := make(chan error, 1)
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	go func() { genErr <- generate(genCtx, cfg, cs, gen, tg) }()
	n, m, err := copyRows(ctx, pool, gen, cfg.events, logw)
	stopGen() // after an error: the generator stops at its next batch
	for range gen {
	}
	if gerr := <-genErr; err == nil {
		err = gerr
	}
	if err != nil {
		return rep, err
	}
	rep.Events, rep.Mentions = n, m
	rep.TargetEvents = cfg.events / cfg.communities
	rep.LoadSeconds = round3(time.Since(t0).Seconds())
	rep.EventsPerSec = float64(int(float64(n) / time.Since(t0).Seconds()))
	fmt.Fprintf(logw, "buzz-fixture: %d events loaded in %.0f s; VACUUM ANALYZE\n", n, rep.LoadSeconds)
	t1 := time.Now()
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return rep, fmt.Errorf("vacuum analyze: %w", err)
	}
	rep.VacuumSeconds = round3(time.Since(t1).Seconds())
	if cfg.targets != "" {
		b, _ := json.Marshal(tg)
		if err := os.WriteFile(cfg.targets, append(b, '\n'), 0o644); err != nil {
			return rep, fmt.Errorf("write --targets: %w", err)
		}
		rep.Targets = cfg.targets
	}
	rep.TotalSeconds = round3(time.Since(began).Seconds())
	return rep, nil
}

// setup creates the communities, c0's alias and one open channel each.
func setup(ctx context.Context, pool *pgxpool.Pool, cfg config) ([]*community, error) {
	st := store.New(pool)
	var cs []*community
	for i := range cfg.communities {
		c := &community{host: "c" + strconv.Itoa(i) + hostSuffix}
		for a := range cfg.authors {
			c.authors = append(c.authors, newAuthor(cfg.seed, i, a))
		}
		cm, err := st.CommunityAdd(ctx, store.CommunityAddParams{Host: c.host})
		if err != nil {
			return nil, fmt.Errorf("create community %s (the fixture loads into a migrated database without it): %w", c.host, err)
		}
		c.id = cm.ID
		c.channel = uuid.NewSHA1(uuid.NameSpaceURL, []byte("buzz-fixture/"+strconv.FormatUint(cfg.seed, 10)+"/"+c.host)).String()
		if err := st.ChannelCreate(ctx, pool, store.ChannelCreateParams{CommunityID: c.id, ID: c.channel, Name: "general",
			Type: "stream", Visibility: "open", CreatedBy: c.authors[0].pubHex}); err != nil {
			return nil, fmt.Errorf("create channel in %s: %w", c.host, err)
		}
		cs = append(cs, c)
	}
	if cfg.alias != "" {
		if _, err := st.CommunityAddHost(ctx, cfg.alias, cs[0].host); err != nil {
			return nil, fmt.Errorf("alias %s of %s: %w", cfg.alias, cs[0].host, err)
		}
	}
	return cs, nil
}

// generate builds every event in batches, community by community, oldest
// first, with its id computed; signing is left to the signers. It fills tg
// from community 0 and closes out.
func generate(ctx context.Context, cfg config, cs []*community, out chan<- []row, tg *targets) error {
	defer close(out)
	vocab := vocabulary()
	per := cfg.events / len(cs)
	batch := make([]row, 0, batchRows)
	for ci, c := range cs {
		n := per
		if ci == len(cs)-1 {
			n = cfg.events - per*(len(cs)-1)
		}
		var seedBytes [8]byte
		binary.LittleEndian.PutUint64(seedBytes[:], uint64(ci))
		rng := rand.New(rand.NewPCG(cfg.seed, binary.LittleEndian.Uint64(seedBytes[:])^0x6669787475726573))
		ids := make([]string, 0, n)
		var words [wordsPerEvent]string
		for i := range n {
			a := rng.IntN(len(c.authors))
			for k := range words {
				words[k] = vocab[rng.IntN(len(vocab))]
			}
			if i%rareEvery == rareEvery/2 {
				words[rng.IntN(len(words))] = rareWord
			}
			at := cfg.end - spanSeconds + 1 + int64(i)*spanSeconds/int64(n)
			mention := c.authors[rng.IntN(len(c.authors))].pubHex
			tags := event.Tags{{"h", c.channel}, {"p", mention}}
			if i > 0 && rng.IntN(2) == 0 {
				ref := ids[rng.IntN(len(ids))]
				tags = append(tags, event.Tag{"e", ref})
				if ci == 0 && len(tg.E) < targetIDs && rng.IntN(max(n/targetIDs, 1)) == 0 {
					tg.E = append(tg.E, ref)
				}
			}
			ev := event.Event{PubKey: c.authors[a].pubHex, CreatedAt: at, Kind: event.KindStreamMessage, Tags: tags,
				Content: strings.Join(words[:], " ")}
			id := sha256.Sum256(ev.Serialize())
			ids = append(ids, hex.EncodeToString(id[:]))
			tj, _ := json.Marshal(tags)
			batch = append(batch, row{c: c, author: a, id: id, at: time.Unix(at, 0).UTC(), tags: tj,
				content: ev.Content, mention: mention})
			if len(batch) == batchRows {
				select {
				case out <- batch:
				case <-ctx.Done():
					return ctx.Err()
				}
				batch = make([]row, 0, batchRows)
			}
		}
		if ci == 0 {
			for _, a := range c.authors {
				tg.Authors = append(tg.Authors, a.pubHex)
			}
			tg.P = tg.Authors // every p tag names an author of the community
		}
	}
	if len(batch) > 0 {
		select {
		case out <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

var (
	eventColumns   = []string{"community_id", "id", "pubkey", "created_at", "kind", "tags", "content", "sig", "received_at", "channel_id"}
	mentionColumns = []string{"community_id", "pubkey_hex", "event_id", "event_created_at", "channel_id", "event_kind"}
)

// copyRows signs the batches of in on every core and loads each with COPY
// (events, then its event_mentions) in a transaction of its own, copiers
// at a time. It returns the rows loaded.
func copyRows(ctx context.Context, pool *pgxpool.Pool, in <-chan []row, total int, logw io.Writer) (events, mentions int, err error) {
	g, gctx := errgroup.WithContext(ctx)
	signed := make(chan []row, copiers)
	var signers sync.WaitGroup
	for range runtime.NumCPU() {
		signers.Add(1)
		g.Go(func() error {
			defer signers.Done()
			for batch := range in {
				for i := range batch {
					r := &batch[i]
					sig, err := schnorr.Sign(r.c.authors[r.author].priv, r.id[:], schnorr.FastSign())
					if err != nil {
						return fmt.Errorf("sign: %w", err)
					}
					copy(r.sig[:], sig.Serialize())
				}
				select {
				case signed <- batch:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}
	go func() {
		signers.Wait()
		close(signed)
	}()
	var loaded, mentioned atomic.Int64
	for range copiers {
		g.Go(func() error {
			for batch := range signed {
				ev, mn, err := copyBatch(gctx, pool, batch)
				if err != nil {
					return err
				}
				loaded.Add(ev)
				mentioned.Add(mn)
			}
			return nil
		})
	}
	done, reported := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reported)
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(logw, "buzz-fixture: %d of %d events loaded\n", loaded.Load(), total)
			case <-done:
				return
			}
		}
	}()
	err = g.Wait()
	close(done)
	<-reported // no progress line is written once the caller logs again
	return int(loaded.Load()), int(mentioned.Load()), err
}

// copyBatch loads one signed batch and its mentions in one transaction and
// returns the rows of each it wrote.
func copyBatch(ctx context.Context, pool *pgxpool.Pool, batch []row) (events, mentions int64, err error) {
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		var err error
		events, err = tx.CopyFrom(ctx, pgx.Identifier{"events"}, eventColumns, pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
			r := &batch[i]
			return []any{r.c.id, r.id[:], r.c.authors[r.author].pub, r.at, int32(event.KindStreamMessage), string(r.tags),
				r.content, r.sig[:], r.at, r.c.channel}, nil
		}))
		if err != nil {
			return fmt.Errorf("copy events: %w", err)
		}
		mentions, err = tx.CopyFrom(ctx, pgx.Identifier{"event_mentions"}, mentionColumns, pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
			r := &batch[i]
			return []any{r.c.id, r.mention, r.id[:], r.at, r.c.channel, int32(event.KindStreamMessage)}, nil
		}))
		if err != nil {
			return fmt.Errorf("copy event_mentions: %w", err)
		}
		return nil
	})
	return events, mentions, err
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
