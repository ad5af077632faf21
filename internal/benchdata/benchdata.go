// Package benchdata is "buzz-bench fixture": it generates the dataset of
// benchmark P3 (REQ on 1M events, docs/PERFORMANCE.md) and loads it
// straight into a relay's PostgreSQL database, so that
// "buzz-bench req --req-targets" can measure REQ on it.
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
// Rows go in through the store's batch insert (internal/benchload), the
// statement of ingest's group commit, one batch per statement: the events
// and their event_mentions, the #p index ingest writes with each event.
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
package benchdata

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/benchload"
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
	// batchRows is the events of one batch insert.
	batchRows = 5000
	// targetIDs bounds the e values written to --targets.
	targetIDs = 4096
	// defaultEnd is 2026-01-01T00:00:00Z: the dataset does not move with
	// the clock.
	defaultEnd = 1767225600
)

// Config is one load, made by Flags.
type Config struct {
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

// Flags registers the fixture's flags on fs, with getenv's DATABASE_URL as
// the default of --database-url, and returns the function that checks them
// once fs is parsed.
func Flags(fs *pflag.FlagSet, getenv func(string) string) func() (Config, error) {
	var c Config
	fs.StringVar(&c.dbURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL URL of the relay's database (default $DATABASE_URL); unix socket or loopback only")
	fs.IntVar(&c.events, "events", 1000000, "kind 9 events in all, spread evenly over the communities")
	fs.IntVar(&c.communities, "communities", 10, "communities c0.bench.local …")
	fs.IntVar(&c.authors, "authors", 64, "authors per community")
	fs.StringVar(&c.alias, "alias", "", "extra host of community c0, e.g. localhost:3390 (the host buzz-bench connects to)")
	fs.StringVar(&c.targets, "targets", "", "file to write community c0's REQ values to (buzz-bench req --req-targets)")
	fs.Int64Var(&c.end, "end", defaultEnd, "unix time of the newest event; events cover the 30 days before it")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of keys, tags and content")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Hour, "cap on the whole load")
	return func() (Config, error) {
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
		return fmt.Errorf("--database-url: host %q is not a unix socket or loopback; buzz-bench fixture only loads local databases", h)
	}
	return nil
}

// Run loads the dataset of cfg and prints its report on stdout and its
// progress on stderr. It returns 0, or 2 after printing {"error": …} on
// stderr.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	rep, err := load(ctx, cfg, stderr)
	if err != nil {
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		_, _ = stderr.Write(append(b, '\n'))
		return 2
	}
	b, _ := json.Marshal(rep)
	_, _ = stdout.Write(append(b, '\n'))
	return 0
}

// report is what the fixture subcommand prints.
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

// newAuthor derives author i of a community from the seed. The derivation
// strings keep the name of the tool that first wrote the dataset
// (buzz-fixture), so the same flags still give the same keys and channels.
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

func load(ctx context.Context, cfg Config, logw io.Writer) (report, error) {
	began := time.Now()
	rep := report{Communities: cfg.communities, AuthorsEach: cfg.authors, Alias: cfg.alias,
		From: cfg.end - spanSeconds + 1, To: cfg.end, SignerRoutines: runtime.NumCPU()}
	pool, err := pg.Open(ctx, cfg.dbURL, pg.PoolConfig{MaxConns: benchload.DefaultWriters + 2})
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
	fmt.Fprintf(logw, "buzz-bench fixture: loading %d events into %d communities\n", cfg.events, cfg.communities)
	t0 := time.Now()
	gen := make(chan []benchload.Event, 4)
	tg := &targets{Kind: event.KindStreamMessage}
	genErr := make(chan error, 1)
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	go func() { genErr <- generate(genCtx, cfg, cs, gen, tg) }()
	keys := signer{}
	for _, c := range cs {
		for _, a := range c.authors {
			keys[a.pubHex] = a.priv
		}
	}
	total := cfg.events
	res, err := benchload.Load(ctx, benchload.Config{Pool: pool, Store: store.New(pool), SignFunc: keys.sign,
		ProgressFunc: func(n int64) { fmt.Fprintf(logw, "buzz-bench fixture: %d of %d events loaded\n", n, total) },
	}, gen)
	stopGen()
	if gerr := <-genErr; err == nil {
		err = gerr
	}
	if err != nil {
		return rep, err
	}
	n := int(res.Events)
	rep.Events, rep.Mentions = n, int(res.Mentions)
	rep.TargetEvents = cfg.events / cfg.communities
	rep.LoadSeconds = round3(time.Since(t0).Seconds())
	rep.EventsPerSec = float64(int(float64(n) / time.Since(t0).Seconds()))
	fmt.Fprintf(logw, "buzz-bench fixture: %d events loaded in %.0f s; VACUUM ANALYZE\n", n, rep.LoadSeconds)
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
func setup(ctx context.Context, pool *pgxpool.Pool, cfg Config) ([]*community, error) {
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
		if err := store.New(pool).ChannelCreate(ctx, store.ChannelCreateParams{CommunityID: c.id, ID: c.channel, Name: "general",
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
func generate(ctx context.Context, cfg Config, cs []*community, out chan<- []benchload.Event, tg *targets) error {
	defer close(out)
	vocab := vocabulary()
	per := cfg.events / len(cs)
	batch := make([]benchload.Event, 0, batchRows)
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
			ev := &event.Event{PubKey: c.authors[a].pubHex, CreatedAt: at, Kind: event.KindStreamMessage, Tags: tags,
				Content: strings.Join(words[:], " ")}
			id := sha256.Sum256(ev.Serialize())
			ev.ID = hex.EncodeToString(id[:])
			ids = append(ids, ev.ID)
			batch = append(batch, benchload.Event{EventInsertParams: store.EventInsertParams{
				CommunityID: c.id, Event: ev, Channel: c.channel}})
			if len(batch) == batchRows {
				select {
				case out <- batch:
				case <-ctx.Done():
					return ctx.Err()
				}
				batch = make([]benchload.Event, 0, batchRows)
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

// signer signs the fixture's events with their authors' keys.
type signer map[string]*btcec.PrivateKey

// sign sets ev.Sig from ev.ID with the key of ev.PubKey, without the
// library's verification of its own result (the fixture signs a million;
// TestFixtureThroughRelay has the relay verify a sample).
func (s signer) sign(ev *event.Event) error {
	priv, ok := s[ev.PubKey]
	if !ok {
		return fmt.Errorf("no key for author %s", ev.PubKey)
	}
	id, err := hex.DecodeString(ev.ID)
	if err != nil {
		return fmt.Errorf("event id: %w", err)
	}
	sig, err := schnorr.Sign(priv, id, schnorr.FastSign())
	if err != nil {
		return err
	}
	ev.Sig = hex.EncodeToString(sig.Serialize())
	return nil
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
