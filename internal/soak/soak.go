package soak

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// soakRun is one deployment under soak and everything measured on it.
type soakRun struct {
	cfg      Config
	dir      string
	db       *database
	redis    *redisServer // nil with one relay
	endpoint *endpoint
	relays   []*relayProc
	comms    []community
	targets  []string
	load     *load

	trafficStart time.Time
	rss          rssWatch
}

// rssWatch samples the relays' summed RSS.
type rssWatch struct {
	mu               sync.Mutex
	start, peak, end int64
}

func (w *rssWatch) sample(relays []*relayProc) int64 {
	var sum int64
	for _, p := range relays {
		sum += rssBytes(p.pid())
	}
	w.mu.Lock()
	w.peak = max(w.peak, sum)
	w.mu.Unlock()
	return sum
}

// soak sets the deployment up, runs the traffic and the faults, checks the
// database and tears everything down. progress gets one line per step.
func soak(ctx context.Context, cfg Config, progress io.Writer) (*summary, error) {
	s, err := setUp(ctx, cfg, progress)
	if s != nil {
		defer s.tearDown(progress)
	}
	if err != nil {
		return nil, err
	}
	faults := s.drive(ctx, progress)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	writeLine(progress, map[string]any{"step": "checking the database against the ledger", "acks": len(s.load.ledger.all())})
	rep, err := s.check(ctx)
	if err != nil {
		return nil, err
	}
	return s.summarize(faults, rep), nil
}

// setUp starts the database, Redis, the listener endpoint and the relays,
// creates the three communities with a channel each and registers the
// listener's targets. On error the returned run (if any) still needs
// tearDown.
func setUp(ctx context.Context, cfg Config, progress io.Writer) (*soakRun, error) {
	dir := cfg.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "buzz-soak-")
		if err != nil {
			return nil, fmt.Errorf("work directory: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	}
	s := &soakRun{cfg: cfg, dir: dir}
	step := func(msg string) { writeLine(progress, map[string]any{"step": msg, "dir": dir}) }

	failover := containsString(cfg.faults, "failover")
	if failover {
		step("starting PostgreSQL: a primary and a synchronous standby")
	} else {
		step("starting PostgreSQL")
	}
	db, err := startDatabase(ctx, filepath.Join(dir, "db"), failover)
	if db != nil {
		s.db = db
	}
	if err != nil {
		return s, err
	}
	if s.endpoint, err = startEndpoint(dir); err != nil {
		return s, err
	}
	relayKey := event.GenerateKey()
	listenerKey := event.GenerateKey()
	const origin = "https://ops.soak.test"
	env := map[string]string{
		"DATABASE_URL":                      db.URL(),
		"BUZZ_AUTO_MIGRATE":                 "true",
		"BUZZ_AUDIT_ENABLED":                "true",
		"BUZZ_RELAY_PRIVATE_KEY":            hex.EncodeToString(relayKey),
		"BUZZ_OPERATOR_LISTENERS":           event.PubKey(listenerKey) + ":" + s.endpoint.url,
		"RELAY_OPERATOR_API_ORIGIN":         origin,
		"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS": "2000",
		"SSL_CERT_FILE":                     s.endpoint.certFile,
		"BUZZ_DB_POOL_SIZE":                 "20",
		// The per-address connection rate an operator facing the internet
		// sets (OPERATIONS, Connection storms): the storm dials from an
		// address of its own, the honest clients stay within the burst.
		"BUZZ_WS_CONNECT_RATE": "20",
		// The ledgered load is honest and heavier than one user: the
		// per-user quotas and the read-time budget are off (0), as in the
		// other load tools, so the figures stay comparable with runs
		// before they existed.
		"BUZZ_READ_TIME_PER_SECOND_MS":                     "0",
		"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN":           "0",
		"BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN":          "0",
		"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC":          "0",
		"BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN":  "0",
		"BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN": "0",
		"BUZZ_CHANNEL_CREATES_PER_HOUR":                    "0",
		// Every worker's bridge reads come from this machine's one
		// address: a per-connection read share of 4 would queue them all,
		// so the share is opened wide and figures stay comparable.
		"BUZZ_READS_PER_CONNECTION": "1000",
	}
	for k, v := range cfg.relayEnv {
		env[k] = v
	}
	if cfg.relays > 1 {
		step("starting Redis")
		if s.redis, err = startRedis(ctx, filepath.Join(dir, "redis")); err != nil {
			return s, err
		}
		env["REDIS_URL"] = s.redis.URL()
	}
	for i := range cfg.relays {
		p, err := newRelay("relay"+strconv.Itoa(i), cfg.relayBin, dir, env)
		if err != nil {
			return s, err
		}
		s.relays = append(s.relays, p)
		step("starting " + p.name)
		if err := p.start(ctx); err != nil { // the first one migrates
			return s, err
		}
	}

	step("creating three communities")
	for i := range 3 {
		host := "c" + strconv.Itoa(i) + ".soak.test"
		out, code, err := runRelayCommand(ctx, cfg.relayBin, s.relays[0].env, "community", "add", "--host", host)
		if err != nil {
			return s, fmt.Errorf("community add %s: %w", host, err)
		}
		if code != 0 {
			return s, fmt.Errorf("community add %s: exit %d: %s", host, code, out)
		}
		c := community{host: host}
		if err := s.channelFor(ctx, &c); err != nil {
			return s, err
		}
		s.comms = append(s.comms, c)
	}
	if err := s.lookUpCommunities(ctx); err != nil {
		return s, err
	}
	for range 8 {
		s.targets = append(s.targets, event.PubKey(event.GenerateKey()))
	}
	if err := s.register(ctx, listenerKey, origin); err != nil {
		return s, err
	}
	return s, nil
}

// channelFor creates c's open channel, retrying while the relay still
// caches the host as unknown (up to 5 s after community add).
func (s *soakRun) channelFor(ctx context.Context, c *community) error {
	owner := event.GenerateKey()
	var conn *client.Conn
	var err error
	for attempt := 0; attempt < 40; attempt++ {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err = client.DialHost(dctx, s.relays[0].wsURL, c.host, owner)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond) // the relay's miss cache lasts 5 s
	}
	if err != nil {
		return fmt.Errorf("connect to %s: %w", c.host, err)
	}
	defer conn.Close()
	c.channel = newUUID()
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: event.KindCreateGroup,
		Tags: event.Tags{{"h", c.channel}, {"name", "soak"}}}
	if err := ev.Sign(owner); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ok, msg, err := conn.Publish(pctx, ev)
	if err != nil {
		return fmt.Errorf("create a channel in %s: %w", c.host, err)
	}
	if !ok {
		return fmt.Errorf("create a channel in %s: %s", c.host, msg)
	}
	return nil
}

// lookUpCommunities fills in the communities' ids.
func (s *soakRun) lookUpCommunities(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, s.db.URL())
	if err != nil {
		return fmt.Errorf("connect to the soak's database: %w", err)
	}
	defer pool.Close()
	for i := range s.comms {
		if err := pool.QueryRow(ctx, `SELECT id::text FROM communities WHERE lower(host) = lower($1)`, s.comms[i].host).Scan(&s.comms[i].id); err != nil {
			return fmt.Errorf("community %s: %w", s.comms[i].host, err)
		}
	}
	return nil
}

// register registers the listener's targets over the operator API.
func (s *soakRun) register(ctx context.Context, listenerKey []byte, origin string) error {
	body := []byte(`{"pubkeys":[`)
	for i, t := range s.targets {
		if i > 0 {
			body = append(body, ',')
		}
		body = strconv.AppendQuote(body, t)
	}
	body = append(body, "]}"...)
	sum := sha256.Sum256(body)
	tok := event.Event{CreatedAt: time.Now().Unix(), Kind: event.KindNIP98,
		Tags: event.Tags{{"u", origin + "/operator/listener/pubkeys"}, {"method", "POST"}, {"payload", hex.EncodeToString(sum[:])}}}
	if err := tok.Sign(listenerKey); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.relays[0].httpURL+"/operator/listener/pubkeys", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Nostr "+base64.StdEncoding.EncodeToString(tok.AppendJSON(nil)))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("register listener targets: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("register listener targets: HTTP %d %s", resp.StatusCode, b)
	}
	return nil
}

// drive runs the traffic for --duration with the faults spread evenly over
// it, then waits for the faults to end.
func (s *soakRun) drive(ctx context.Context, progress io.Writer) []faultReport {
	lg := &ledger{}
	if f, err := os.Create(filepath.Join(s.dir, "ledger.jsonl")); err == nil {
		defer f.Close()
		lg.w = f
	}
	s.load = &load{relays: s.relays, comms: s.comms, targets: s.targets, opWait: s.cfg.opWait,
		stats: newStats(), ledger: lg, maxOps: int64(s.cfg.maxOps), pace: s.cfg.pace}
	s.rss.start = s.rss.sample(s.relays)
	s.trafficStart = time.Now()
	tctx, cancel := context.WithTimeout(ctx, s.cfg.duration)
	defer cancel()

	stopSampler := make(chan struct{})
	var samplerDone sync.WaitGroup
	samplerDone.Go(func() {
		for {
			select {
			case <-stopSampler:
				return
			case <-time.After(500 * time.Millisecond): // sampling interval
				s.rss.sample(s.relays)
			}
		}
	})

	var reports []faultReport
	var faultsDone sync.WaitGroup
	faultsDone.Go(func() {
		n := len(s.cfg.faults)
		for i, name := range s.cfg.faults {
			at := s.trafficStart.Add(time.Duration(float64(s.cfg.duration) * float64(i+1) / float64(n+2)))
			sleepCtx(tctx, time.Until(at))
			if tctx.Err() != nil {
				reports = append(reports, faultReport{Name: name, Error: "not injected: the traffic ended first"})
				continue
			}
			writeLine(progress, map[string]any{"step": "fault " + name, "at_s": round1(time.Since(s.trafficStart).Seconds())})
			reports = append(reports, s.inject(ctx, name))
		}
	})
	s.load.run(tctx, s.cfg.conns, s.cfg.seed)
	faultsDone.Wait()
	close(stopSampler)
	samplerDone.Wait()
	s.rss.end = s.rss.sample(s.relays)
	for i := range reports {
		r := &reports[i]
		r.HonestP99ms, r.HonestFailed = s.load.stats.between(r.began, r.ended)
		r.BeforeP99ms, _ = s.load.stats.between(r.began.Add(-r.ended.Sub(r.began)), r.began)
	}
	return reports
}

// tearDown stops the relays (SIGTERM), Redis, the endpoint and the
// database, and removes the work directory unless --keep or --dir.
func (s *soakRun) tearDown(progress io.Writer) {
	for _, p := range s.relays {
		p.signal(syscall.SIGTERM, 30*time.Second)
	}
	if s.redis != nil {
		s.redis.kill()
	}
	if s.endpoint != nil {
		s.endpoint.close()
	}
	if s.db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := s.db.stop(ctx); err != nil {
			writeLine(progress, map[string]string{"error": "stop the soak's database: " + err.Error()})
		}
		cancel()
	}
	if !s.cfg.keep && s.cfg.dir == "" {
		_ = os.RemoveAll(s.dir)
	}
}

// newUUID returns a random version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

func round2(x float64) float64 { return math.Round(x*100) / 100 }
