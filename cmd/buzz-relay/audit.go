package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// Exit codes of `audit head` and `audit verify` (docs/PROTOCOL.md §13.10).
const (
	exitVerified  = 0
	exitIntegrity = 1
	exitCannot    = 2
	exitNothing   = 3
)

// relayKeyHelp says how to give the relay a stable key; audit head needs
// one, and audit verify uses it to trust a checkpoint.
const relayKeyHelp = `BUZZ_RELAY_PRIVATE_KEY is the relay's signing key, 64 hex. Without it the
relay makes a new key at every start, and a checkpoint signed by a key
that vanishes proves nothing later. Make one once and keep it with the
relay's configuration:
  export BUZZ_RELAY_PRIVATE_KEY=$(buzz keygen --get private_key)`

// auditCmd is the `audit head | verify` group (docs/PROTOCOL.md §13.10).
func auditCmd() *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:   "audit",
		Short: "export a signed checkpoint of a community's audit chain, verify a chain",
		Long: `audit works on a community's tamper-evident hash chain. head exports
the chain head as an event signed with BUZZ_RELAY_PRIVATE_KEY; keep it
somewhere the database's writers cannot reach. verify recomputes the
chain and, given such a checkpoint, proves the chain was not rewritten
since. --community takes the community's host or one of its aliases.

` + relayKeyHelp,
		Example: `  export BUZZ_RELAY_PRIVATE_KEY=$(buzz keygen --get private_key)
  buzz-relay audit head --community localhost:3000 > checkpoint.json
  buzz-relay audit verify --community localhost:3000 --checkpoint checkpoint.json`,
	}, auditHeadCmd(), auditVerifyCmd())
}

// auditTarget is the community an audit command works on, with its database.
type auditTarget struct {
	db          *app.Database
	host        string // the community's normalised host
	communityID string
}

// openTarget connects like `migrate` and resolves --community through
// aliases. The caller closes t.db.
func openTarget(c *cobra.Command, cfg config.Config, raw string) (*auditTarget, error) {
	h := tenant.Normalize(raw)
	if h == "" {
		return nil, errInvalidHost
	}
	db, err := openDB(c, cfg, pg.MigrateCheck, false)
	if err != nil {
		return nil, err
	}
	com, err := store.New(db.Pool).CommunityByHost(c.Context(), h)
	if err != nil {
		db.Close()
		if errors.Is(err, pg.ErrNotFound) {
			return nil, noCommunity(h)
		}
		return nil, err
	}
	return &auditTarget{db: db, host: com.Host, communityID: com.ID}, nil
}

func auditHeadCmd() *cobra.Command {
	var community string
	c := &cobra.Command{
		Use:   "head --community HOST",
		Short: "print the chain head as a signed checkpoint",
		Long: `audit head prints the checkpoint of the community's chain head: one
kind 48002 event, signed with BUZZ_RELAY_PRIVATE_KEY, on one line of
stdout. On a terminal it also prints a summary on stderr (host, seq,
hash, entry time, intents not yet chained). It does not verify the chain:
pair it with audit verify.

It needs BUZZ_RELAY_PRIVATE_KEY; without it, it exits 2 with
"audit head needs a stable relay key: set BUZZ_RELAY_PRIVATE_KEY".

` + relayKeyHelp + `

Exit status: 0 printed, 2 cannot run (no key, unknown host, database),
3 the chain is empty.`,
		Example: `  export BUZZ_RELAY_PRIVATE_KEY=$(buzz keygen --get private_key)
  buzz-relay audit head --community localhost:3000 > checkpoint.json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireFlag(c, "community", "HOST"); err != nil {
				return err
			}
			return auditHead(c, community)
		},
	}
	c.Flags().StringVar(&community, "community", "", "host or alias of the community (required)")
	return c
}

// auditHead prints the signed checkpoint of the chain head (docs/PROTOCOL.md §13.10).
func auditHead(c *cobra.Command, community string) error {
	cfg, _, err := loadConfig()
	if err != nil {
		return err
	}
	if cfg.RelayPrivateKey == nil {
		return errors.New("audit head needs a stable relay key: set BUZZ_RELAY_PRIVATE_KEY")
	}
	tg, err := openTarget(c, cfg, community)
	if err != nil {
		return err
	}
	defer tg.db.Close()
	ctx := c.Context()
	head, found, err := audit.HeadGet(ctx, tg.db.Pool, tg.communityID)
	if err != nil {
		return err
	}
	if !found {
		return exitWith(exitNothing, fmt.Sprintf("audit chain of %s is empty", tg.host))
	}
	ev, err := audit.NewCheckpoint(cfg.RelayPrivateKey, tg.host, head, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(c.OutOrStdout(), string(ev.AppendJSON(nil)))
	if stderr := c.ErrOrStderr(); isTerminal(stderr) {
		pending, _ := audit.PendingCount(ctx, tg.db.Pool, tg.communityID)
		fmt.Fprintf(stderr, "host %s\nseq  %d\nhash %x\nat   %s\npending intents not yet chained: %d\n",
			tg.host, head.Seq, head.Hash, head.CreatedAt.UTC().Format(time.RFC3339), pending)
	}
	return nil
}

// verifyOptions are the flags of audit verify.
type verifyOptions struct {
	community      string
	from, to       int64
	toSet          bool
	checkpointFile string
	signer         string
	json           bool
}

func auditVerifyCmd() *cobra.Command {
	var o verifyOptions
	c := &cobra.Command{
		Use:   "verify --community HOST [--from N] [--to M] [--checkpoint FILE] [--signer HEX] [--json]",
		Short: "verify a range of the chain, optionally against a checkpoint",
		Long: `audit verify recomputes every hash of the community's chain from --from
(default 1) to --to (default: the head when it starts) and prints
  verified <host>: seq <from>..<to> (<n> entries) in <duration>
or "FAILED <host>: <error>". With --json it prints one object instead:
  {"host","from","to","entries","ok","error","checkpoint":{"seq","hash","taken_at","signer","matched"}}
On a terminal a progress bar goes to stderr.

With --checkpoint FILE (from audit head) it also proves that the chain was
not rewritten since the checkpoint was taken. The checkpoint must be
signed by the key of BUZZ_RELAY_PRIVATE_KEY, or by --signer HEX after the
key was rotated.

Exit status: 0 verified (and the checkpoint matched), 1 integrity failure
(a hash mismatch, a checkpoint mismatch, removed entries), 2 cannot verify
(usage, unknown host, database, bad checkpoint), 3 nothing in range.`,
		Example: `  buzz-relay audit verify --community localhost:3000
  buzz-relay audit verify --community localhost:3000 --checkpoint checkpoint.json
  buzz-relay audit verify --community team.example --from 1000 --to 2000 --json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireFlag(c, "community", "HOST"); err != nil {
				return err
			}
			o.toSet = c.Flags().Changed("to")
			if o.from < 1 || (o.toSet && o.to < o.from) {
				return errors.New("audit verify needs 1 <= --from <= --to")
			}
			return auditVerify(c, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.community, "community", "", "host or alias of the community (required)")
	f.Int64Var(&o.from, "from", 1, "first seq to verify")
	f.Int64Var(&o.to, "to", 0, "last seq to verify (default: the head at start)")
	f.StringVar(&o.checkpointFile, "checkpoint", "", "a checkpoint file exported by audit head")
	f.StringVar(&o.signer, "signer", "", "trusted checkpoint signer (64 hex), for a rotated relay key")
	f.BoolVar(&o.json, "json", false, "print one JSON object instead of text")
	return c
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

// verifyRun is one audit verify: its options, target, checkpoint and the
// report it fills.
type verifyRun struct {
	o      verifyOptions
	tg     *auditTarget
	cp     *audit.Checkpoint
	report verifyReport
	stdout io.Writer
	stderr io.Writer
}

// auditVerify verifies a range of the chain, optionally against a
// checkpoint (docs/PROTOCOL.md §13.10). Its error carries exit status 1, 2 or 3.
func auditVerify(c *cobra.Command, o verifyOptions) error {
	cfg, _, err := loadConfig()
	if err != nil {
		return err
	}
	// Checkpoint steps 1–2 need no database.
	var cp *audit.Checkpoint
	if o.checkpointFile != "" {
		if cp, err = readCheckpoint(o.checkpointFile, o.signer, cfg.RelayPrivateKey); err != nil {
			return err
		}
	}
	tg, err := openTarget(c, cfg, o.community)
	if err != nil {
		return err
	}
	defer tg.db.Close()
	ctx := c.Context()
	if cp != nil {
		cpCom, err := store.New(tg.db.Pool).CommunityByHost(ctx, tenant.Normalize(cp.Host))
		if err != nil || cpCom.ID != tg.communityID {
			return errors.New("checkpoint: for a different community")
		}
		if o.toSet && o.to < cp.Seq {
			return fmt.Errorf("checkpoint: --to %d is before checkpoint seq %d", o.to, cp.Seq)
		}
	}
	head, found, err := audit.HeadGet(ctx, tg.db.Pool, tg.communityID)
	if err != nil {
		return err
	}
	if !o.toSet {
		o.to = head.Seq
	}
	r := &verifyRun{o: o, tg: tg, cp: cp, report: verifyReport{Host: tg.host, From: o.from, To: o.to},
		stdout: c.OutOrStdout(), stderr: c.ErrOrStderr()}
	return r.finish(r.verify(ctx, head, found))
}

// readCheckpoint parses the checkpoint file and checks its signer against
// --signer or the relay key (checkpoint steps 1 and 2).
func readCheckpoint(path, signer string, relayKey []byte) (*audit.Checkpoint, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	cp, err := audit.ParseCheckpoint([]byte(strings.TrimSpace(string(raw))))
	if err != nil {
		return nil, err
	}
	trusted := strings.ToLower(signer)
	if trusted == "" && relayKey != nil {
		trusted = event.PubKey(relayKey)
	}
	if trusted == "" {
		return nil, errors.New("checkpoint: no trusted signer (set BUZZ_RELAY_PRIVATE_KEY or --signer)")
	}
	if cp.Signer != trusted {
		return nil, fmt.Errorf("checkpoint: signed by %s, expected %s", cp.Signer, trusted)
	}
	return &cp, nil
}

// verdict is the outcome of a verify run: its exit status and, unless it
// verified, the error text.
type verdict struct {
	code int
	msg  string
}

// verify checks the range against the chain read at head, then the
// checkpoint's hash.
func (r *verifyRun) verify(ctx context.Context, head audit.Head, found bool) verdict {
	o, cp, db := r.o, r.cp, r.tg.db
	if cp != nil {
		r.report.Checkpoint = &checkpointReport{Seq: cp.Seq, Hash: cp.Hash, TakenAt: cp.TakenAt.Format(time.RFC3339), Signer: cp.Signer}
		if !found || head.Seq < cp.Seq {
			return verdict{exitIntegrity, fmt.Sprintf("chain ends at seq %d, before checkpoint seq %d: entries were removed", head.Seq, cp.Seq)}
		}
	}
	if !found || o.from > head.Seq {
		return verdict{exitNothing, "nothing to verify in range"}
	}
	bar := newProgress(r.stderr, min(o.to, head.Seq)-o.from+1, isTerminal(r.stderr))
	ok, err := audit.Verify(ctx, db.Pool, audit.VerifyParams{CommunityID: r.tg.communityID, From: o.from, To: o.to,
		ProgressFunc: func(done int64) { r.report.Entries = done; bar.set(done) }})
	bar.done()
	if err != nil {
		var dbErr *audit.DatabaseError
		if errors.As(err, &dbErr) {
			return verdict{exitCannot, err.Error()}
		}
		return verdict{exitIntegrity, err.Error()}
	}
	if !ok {
		return verdict{exitNothing, "nothing to verify in range"}
	}
	if cp != nil {
		stored, _, err := audit.HashAt(ctx, db.Pool, r.tg.communityID, cp.Seq)
		if err != nil {
			return verdict{exitCannot, err.Error()}
		}
		if hex.EncodeToString(stored) != cp.Hash {
			return verdict{exitIntegrity, fmt.Sprintf("checkpoint mismatch at seq %d: the chain was rewritten after the checkpoint was taken", cp.Seq)}
		}
		r.report.Checkpoint.Matched = true
	}
	return verdict{exitVerified, ""}
}

// finish prints the outcome (text or --json) and returns the exit status.
// Without --json a failure is also printed on stderr.
func (r *verifyRun) finish(v verdict) error {
	if v.msg != "" {
		r.report.Error = &v.msg
	}
	r.report.OK = v.code == exitVerified
	switch {
	case r.o.json:
		printJSON(r.stdout, r.report)
	case v.code == exitVerified:
		r.printVerified()
	default:
		fmt.Fprintf(r.stdout, "FAILED %s: %s\n", r.tg.host, v.msg)
	}
	if v.code == exitVerified {
		return nil
	}
	if r.o.json {
		return exitWith(v.code, "")
	}
	return exitWith(v.code, v.msg)
}

// printVerified prints the success lines of docs/PROTOCOL.md §13.10.
func (r *verifyRun) printVerified() {
	o, cp := r.o, r.cp
	fmt.Fprintf(r.stdout, "verified %s: seq %d..%d (%d entries) in %s\n", r.tg.host, o.from, o.to, r.report.Entries,
		time.Since(start).Round(time.Millisecond))
	if cp == nil {
		return
	}
	fmt.Fprintf(r.stdout, "checkpoint seq %d matches (taken %s, signed by %s)\n", cp.Seq, cp.TakenAt.Format(time.RFC3339), npub(cp.Signer))
	if o.from > 1 {
		fmt.Fprintf(r.stdout, "note: --from %d proves only seq %d..%d against the checkpoint\n", o.from, o.from, cp.Seq)
	}
}

// start is when the process began; verify reports its duration from it.
var start = time.Now()

// npub encodes a hex pubkey as a NIP-19 npub, or returns it as it is when
// it is not a pubkey.
func npub(pubHex string) string {
	if s := cli.NPub(pubHex); s != "" {
		return s
	}
	return pubHex
}
