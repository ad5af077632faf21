package export

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// The file format of docs/OPERATIONS.md "Exporting a community".
const (
	// Format is the header's "format" value.
	Format = "buzz-community-export"
	// Version is the header's "version": a change that an importer of
	// this version could misread takes the next one.
	Version = 1
)

// Batch is how many rows one FETCH of the export cursor reads, so the most
// events the export holds in memory at once. An event is at most
// BUZZ_MAX_EVENT_BYTES of JSON (384 KiB by default), so a batch is at most
// about 96 MiB at the default and a few hundred KiB for ordinary messages;
// 256 rows per round trip keep the round trips a small part of the time.
const Batch = 256

// Reasons the header gives for a missing checkpoint ("no_checkpoint").
const (
	NoKey   = "no relay key: BUZZ_RELAY_PRIVATE_KEY is not set"
	NoChain = "the audit chain is empty"
)

// Params is one export.
type Params struct {
	// Pool is the database; the export takes one connection for its snapshot.
	Pool *pgxpool.Pool
	// CommunityID and Host name the community (Host as the header states it).
	CommunityID string
	Host        string
	// RelayKey is the relay's private key, nil when none is configured:
	// then the header has no relay pubkey and no checkpoint.
	RelayKey []byte
	// Now is the time the checkpoint and the header carry.
	Now time.Time
	// Progress, when set, is called with the events written so far and
	// the header's count, after the header and after each batch.
	Progress func(done, total int64)
}

// Header is the first line of an export.
type Header struct {
	Type        string `json:"type"` // "header"
	Format      string `json:"format"`
	Version     int    `json:"version"`
	Host        string `json:"host"`
	CommunityID string `json:"community_id"`
	// RelayPubkey is the hex pubkey of the relay key, nil without one.
	RelayPubkey *string `json:"relay_pubkey"`
	ExportedAt  string  `json:"exported_at"`
	Events      int64   `json:"events"`
	Deleted     int64   `json:"deleted"`
	// Audit is the chain head in the snapshot, nil for an empty chain.
	Audit *AuditHead `json:"audit"`
	// AuditPending counts intents committed but not yet in the chain.
	AuditPending int64 `json:"audit_pending"`
	// Checkpoint is the kind 48002 event of Audit signed by the relay key.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// NoCheckpoint says why there is no checkpoint (NoKey, NoChain).
	NoCheckpoint string `json:"no_checkpoint,omitempty"`
}

// AuditHead is the chain head a header names.
type AuditHead struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// Trailer is the last line of an export.
type Trailer struct {
	Type   string `json:"type"` // "trailer"
	Events int64  `json:"events"`
	SHA256 string `json:"sha256"`
}

// Run writes the export of p to w: header, events, trailer. It reads one
// REPEATABLE READ READ ONLY transaction, so the counts, the chain head
// and the rows are one snapshot while the relay keeps writing. On error
// what was written is incomplete: it has no trailer. It returns the header
// and the trailer it wrote.
func Run(ctx context.Context, p Params, w io.Writer) (Header, Trailer, error) {
	tx, err := p.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Header{}, Trailer{}, fmt.Errorf("begin snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	h, err := header(ctx, tx, p)
	if err != nil {
		return Header{}, Trailer{}, err
	}
	out := &body{w: bufio.NewWriterSize(w, 1<<16), sum: sha256.New()}
	if err := out.line(h); err != nil {
		return Header{}, Trailer{}, err
	}
	progress := func() {
		if p.Progress != nil {
			p.Progress(out.events, h.Events)
		}
	}
	progress()
	err = store.New(tx).EventExport(ctx, p.CommunityID, Batch, func(rows []store.EventRow) error {
		for i := range rows {
			if err := out.event(rows[i].JSON); err != nil {
				return err
			}
		}
		progress()
		return nil
	})
	if err != nil {
		return Header{}, Trailer{}, err
	}
	if out.events != h.Events {
		return Header{}, Trailer{}, fmt.Errorf("snapshot read %d events, counted %d", out.events, h.Events)
	}
	t := Trailer{Type: "trailer", Events: out.events, SHA256: hex.EncodeToString(out.sum.Sum(nil))}
	if err := out.line(t); err != nil {
		return Header{}, Trailer{}, err
	}
	if err := out.w.Flush(); err != nil {
		return Header{}, Trailer{}, fmt.Errorf("write: %w", err)
	}
	return h, t, nil
}

// header reads the counts and the chain head in the snapshot and signs the
// checkpoint.
func header(ctx context.Context, tx pgx.Tx, p Params) (Header, error) {
	h := Header{Type: "header", Format: Format, Version: Version, Host: p.Host, CommunityID: p.CommunityID,
		ExportedAt: p.Now.UTC().Format(time.RFC3339)}
	counts, err := store.New(tx).EventExportCount(ctx, p.CommunityID)
	if err != nil {
		return Header{}, err
	}
	h.Events, h.Deleted = counts.Events, counts.Deleted
	head, found, err := audit.HeadGet(ctx, tx, p.CommunityID)
	if err != nil {
		return Header{}, fmt.Errorf("audit head: %w", err)
	}
	if h.AuditPending, err = audit.PendingCount(ctx, tx, p.CommunityID); err != nil {
		return Header{}, fmt.Errorf("audit pending: %w", err)
	}
	if found {
		h.Audit = &AuditHead{Seq: head.Seq, Hash: hex.EncodeToString(head.Hash)}
	}
	if p.RelayKey != nil {
		pub := event.PubKey(p.RelayKey)
		h.RelayPubkey = &pub
	}
	switch {
	case p.RelayKey == nil:
		h.NoCheckpoint = NoKey
	case !found:
		h.NoCheckpoint = NoChain
	default:
		cp, err := audit.NewCheckpoint(p.RelayKey, p.Host, head, p.Now)
		if err != nil {
			return Header{}, err
		}
		h.Checkpoint = cp.AppendJSON(nil)
	}
	return h, nil
}

// body writes the lines and hashes the event lines, each with its "\n".
type body struct {
	w      *bufio.Writer
	sum    hash.Hash
	events int64
}

// line writes v as one JSON line, outside the hash.
func (b *body) line(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.write(append(raw, '\n'))
}

// event writes one event line and adds it to the hash.
func (b *body) event(raw []byte) error {
	b.sum.Write(raw)
	b.sum.Write(newline)
	b.events++
	if err := b.write(raw); err != nil {
		return err
	}
	return b.write(newline)
}

func (b *body) write(p []byte) error {
	if _, err := b.w.Write(p); err != nil {
		return &WriteError{Err: err}
	}
	return nil
}

var newline = []byte{'\n'}

// WriteError is a failure to write the export, as opposed to reading it.
type WriteError struct{ Err error }

// Error names the failed write.
func (e *WriteError) Error() string { return "write: " + e.Err.Error() }

// Unwrap returns the writer's error.
func (e *WriteError) Unwrap() error { return e.Err }
