package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// Exit codes of `audit verify` (spec 30 §10.2).
const (
	exitVerified  = 0
	exitIntegrity = 1
	exitCannot    = 2
	exitNothing   = 3
)

// auditCmd runs `audit head | verify`.
func auditCmd(ctx context.Context, args []string) int {
	if len(args) == 0 {
		return fail(errUsage)
	}
	switch args[0] {
	case "head":
		return auditHead(ctx, args[1:])
	case "verify":
		return auditVerify(ctx, args[1:])
	}
	return fail(errUsage)
}

// auditTarget is the community an audit command works on, with its database.
type auditTarget struct {
	db          *app.Database
	host        string // the community's normalised host
	communityID string
}

// openTarget connects like `migrate` and resolves --community through aliases.
func openTarget(ctx context.Context, raw string) (*auditTarget, error) {
	h := tenant.Normalize(raw)
	if h == "" {
		return nil, errors.New("invalid host")
	}
	cfg, _, err := loadConfig()
	if err != nil {
		return nil, err
	}
	db, err := app.OpenDatabase(ctx, cfg, quietLogger(), pg.MigrateCheck)
	if err != nil {
		return nil, err
	}
	com, err := store.New(db.Pool).CommunityByHost(ctx, h)
	if errors.Is(err, pg.ErrNotFound) {
		db.Close()
		return nil, fmt.Errorf("no community is configured for host %s", h)
	} else if err != nil {
		db.Close()
		return nil, err
	}
	return &auditTarget{db: db, host: com.Host, communityID: com.ID}, nil
}

// auditHead prints the signed checkpoint of the chain head (spec 30 §10.1).
func auditHead(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("audit head", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	community := fs.String("community", "", "host of the community")
	if err := fs.Parse(args); err != nil || *community == "" || fs.NArg() > 0 {
		return fail(errUsage)
	}
	cfg, _, err := loadConfig()
	if err != nil {
		return fail(err)
	}
	if cfg.RelayPrivateKey == nil {
		return fail(errors.New("audit head needs a stable relay key: set BUZZ_RELAY_PRIVATE_KEY"))
	}
	tg, err := openTarget(ctx, *community)
	if err != nil {
		return fail(err)
	}
	defer tg.db.Close()
	head, found, err := audit.HeadGet(ctx, tg.db.Pool, tg.communityID)
	if err != nil {
		return fail(err)
	}
	if !found {
		fmt.Fprintf(os.Stderr, "audit chain of %s is empty\n", tg.host)
		return exitNothing
	}
	ev, err := audit.NewCheckpoint(cfg.RelayPrivateKey, tg.host, head, time.Now())
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(os.Stdout, string(ev.AppendJSON(nil)))
	if isTerminal(os.Stderr) {
		pending, _ := audit.PendingCount(ctx, tg.db.Pool, tg.communityID)
		fmt.Fprintf(os.Stderr, "host %s\nseq  %d\nhash %x\nat   %s\npending intents not yet chained: %d\n",
			tg.host, head.Seq, head.Hash, head.CreatedAt.UTC().Format(time.RFC3339), pending)
	}
	return 0
}

// verifyReport is the --json output of audit verify.
type verifyReport struct {
	Host       string            `json:"host"`
	From       int64             `json:"from"`
	To         int64             `json:"to"`
	Entries    int64             `json:"entries"`
	OK         bool              `json:"ok"`
	Error      *string           `json:"error"`
	Checkpoint *checkpointReport `json:"checkpoint"`
}

type checkpointReport struct {
	Seq     int64  `json:"seq"`
	Hash    string `json:"hash"`
	TakenAt string `json:"taken_at"`
	Signer  string `json:"signer"`
	Matched bool   `json:"matched"`
}

// auditVerify verifies a range of the chain, optionally against a
// checkpoint (spec 30 §10.2), and exits 0, 1, 2 or 3.
func auditVerify(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	community := fs.String("community", "", "host of the community")
	from := fs.Int64("from", 0, "first seq (default 1)")
	to := fs.Int64("to", 0, "last seq (default: the head at start)")
	cpFile := fs.String("checkpoint", "", "a checkpoint exported by audit head")
	signer := fs.String("signer", "", "trusted checkpoint signer (hex), for a rotated key")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil || *community == "" || fs.NArg() > 0 {
		return fail(errUsage)
	}
	fromSet, toSet := false, false
	fs.Visit(func(f *flag.Flag) {
		fromSet = fromSet || f.Name == "from"
		toSet = toSet || f.Name == "to"
	})
	if !fromSet {
		*from = 1
	}
	if *from < 1 || (toSet && *to < *from) {
		return fail(errors.New("audit verify needs 1 <= --from <= --to"))
	}
	cfg, _, err := loadConfig()
	if err != nil {
		return fail(err)
	}
	// Checkpoint steps 1–2 need no database.
	var cp *audit.Checkpoint
	if *cpFile != "" {
		raw, err := os.ReadFile(*cpFile)
		if err != nil {
			return fail(fmt.Errorf("checkpoint: %w", err))
		}
		c, err := audit.ParseCheckpoint([]byte(strings.TrimSpace(string(raw))))
		if err != nil {
			return fail(err)
		}
		trusted := strings.ToLower(*signer)
		if trusted == "" && cfg.RelayPrivateKey != nil {
			trusted = event.PubKey(cfg.RelayPrivateKey)
		}
		if trusted == "" {
			return fail(errors.New("checkpoint: no trusted signer (set BUZZ_RELAY_PRIVATE_KEY or --signer)"))
		}
		if c.Signer != trusted {
			return fail(fmt.Errorf("checkpoint: signed by %s, expected %s", c.Signer, trusted))
		}
		cp = &c
	}
	tg, err := openTarget(ctx, *community)
	if err != nil {
		return fail(err)
	}
	defer tg.db.Close()
	if cp != nil {
		cpCom, err := store.New(tg.db.Pool).CommunityByHost(ctx, tenant.Normalize(cp.Host))
		if err != nil || cpCom.ID != tg.communityID {
			return fail(errors.New("checkpoint: for a different community"))
		}
		if toSet && *to < cp.Seq {
			return fail(fmt.Errorf("checkpoint: --to %d is before checkpoint seq %d", *to, cp.Seq))
		}
	}
	head, found, err := audit.HeadGet(ctx, tg.db.Pool, tg.communityID)
	if err != nil {
		return fail(err)
	}
	if !toSet {
		*to = head.Seq
	}
	report := verifyReport{Host: tg.host, From: *from, To: *to}
	finish := func(code int, msg string) int {
		if msg != "" {
			report.Error = &msg
		}
		report.OK = code == exitVerified
		if *asJSON {
			printJSON(report)
		} else if code == exitVerified {
			fmt.Fprintf(os.Stdout, "verified %s: seq %d..%d (%d entries) in %s\n", tg.host, *from, *to, report.Entries, time.Since(start).Round(time.Millisecond))
			if cp != nil {
				fmt.Fprintf(os.Stdout, "checkpoint seq %d matches (taken %s, signed by %s)\n", cp.Seq, cp.TakenAt.Format(time.RFC3339), npub(cp.Signer))
				if *from > 1 {
					fmt.Fprintf(os.Stdout, "note: --from %d proves only seq %d..%d against the checkpoint\n", *from, *from, cp.Seq)
				}
			}
		} else {
			fmt.Fprintf(os.Stdout, "FAILED %s: %s\n", tg.host, msg)
		}
		if code != exitVerified && !*asJSON {
			fmt.Fprintln(os.Stderr, msg)
		}
		return code
	}
	if cp != nil {
		report.Checkpoint = &checkpointReport{Seq: cp.Seq, Hash: cp.Hash, TakenAt: cp.TakenAt.Format(time.RFC3339), Signer: cp.Signer}
		if !found || head.Seq < cp.Seq {
			return finish(exitIntegrity, fmt.Sprintf("chain ends at seq %d, before checkpoint seq %d: entries were removed", head.Seq, cp.Seq))
		}
	}
	if !found || *from > head.Seq {
		return finish(exitNothing, "nothing to verify in range")
	}
	bar := newProgress(os.Stderr, min(*to, head.Seq)-*from+1, isTerminal(os.Stderr))
	ok, err := audit.Verify(ctx, tg.db.Pool, audit.VerifyParams{CommunityID: tg.communityID, From: *from, To: *to,
		ProgressFunc: func(done int64) { report.Entries = done; bar.set(done) }})
	bar.done()
	if err != nil {
		var db *audit.DatabaseError
		if errors.As(err, &db) {
			return finish(exitCannot, err.Error())
		}
		return finish(exitIntegrity, err.Error())
	}
	if !ok {
		return finish(exitNothing, "nothing to verify in range")
	}
	if cp != nil {
		stored, _, err := audit.HashAt(ctx, tg.db.Pool, tg.communityID, cp.Seq)
		if err != nil {
			return finish(exitCannot, err.Error())
		}
		if hex.EncodeToString(stored) != cp.Hash {
			return finish(exitIntegrity, fmt.Sprintf("checkpoint mismatch at seq %d: the chain was rewritten after the checkpoint was taken", cp.Seq))
		}
		report.Checkpoint.Matched = true
	}
	return finish(exitVerified, "")
}

// start is when the process began; verify reports its duration from it.
var start = time.Now()

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress is the verify progress bar: done/total, rate and ETA on one
// line, redrawn at most 10 times a second, only on a terminal.
type progress struct {
	w      io.Writer
	total  int64
	on     bool
	start  time.Time
	mu     sync.Mutex
	last   time.Time
	drawn  bool
	latest int64
}

func newProgress(w io.Writer, total int64, on bool) *progress {
	return &progress{w: w, total: max(total, 1), on: on, start: time.Now()}
}

func (p *progress) set(done int64) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latest = done
	if time.Since(p.last) < 100*time.Millisecond && done < p.total {
		return
	}
	p.last = time.Now()
	p.draw()
}

func (p *progress) draw() {
	elapsed := time.Since(p.start).Seconds()
	rate := float64(p.latest) / max(elapsed, 1e-3)
	eta := time.Duration(float64(p.total-p.latest) / max(rate, 1e-3) * float64(time.Second)).Round(time.Second)
	width := 30
	filled := int(int64(width) * min(p.latest, p.total) / p.total)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d entries  %.0f/s  ETA %s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.latest, p.total, rate, eta)
	p.drawn = true
}

func (p *progress) done() {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	fmt.Fprintln(p.w)
}

// npub encodes a hex pubkey as NIP-19 bech32.
func npub(pubHex string) string {
	data, err := hex.DecodeString(pubHex)
	if err != nil {
		return pubHex
	}
	// 8-bit → 5-bit groups.
	var conv []byte
	acc, bits := 0, 0
	for _, b := range data {
		acc = acc<<8 | int(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			conv = append(conv, byte(acc>>bits&31))
		}
	}
	if bits > 0 {
		conv = append(conv, byte(acc<<(5-bits)&31))
	}
	const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	hrp := "npub"
	values := make([]byte, 0, len(hrp)*2+1+len(conv)+6)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]&31)
	}
	values = append(values, conv...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	mod := polymod(values) ^ 1
	out := []byte(hrp + "1")
	for _, c := range conv {
		out = append(out, charset[c])
	}
	for i := 0; i < 6; i++ {
		out = append(out, charset[(mod>>(5*(5-i)))&31])
	}
	return string(out)
}

func polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := 0; i < 5; i++ {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}
