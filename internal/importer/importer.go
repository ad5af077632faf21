package importer

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/export"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Params is one import.
type Params struct {
	// Pool is the database the target community lives in.
	Pool *pgxpool.Pool
	// CommunityID and Host name the target community.
	CommunityID string
	Host        string
	// RelayKey signs the state this relay regenerates (39000–39002 and
	// the membership notices): the key the relay serving Host runs with.
	RelayKey []byte
	// AuditEnabled writes the events' audit intents and the import's own
	// (BUZZ_AUDIT_ENABLED).
	AuditEnabled bool
	// Now is the real clock, for NIP-40 expirations. Default time.Now.
	Now func() time.Time
	// Progress, when set, is called with the event lines read so far and
	// the header's count, every Batch lines and at the end.
	Progress func(done, total int64)
}

// Batch is how often Run reports progress, in event lines.
const Batch = 256

// Summary is what an import did, the command's JSON answer.
type Summary struct {
	Host string `json:"host"`
	// Source is the header's host.
	Source string `json:"source_host"`
	// Events is the number of event lines read.
	Events int64 `json:"events"`
	// Imported were stored now; Duplicates were stored already (a
	// re-run), lost to a newer replaceable version, or make a channel or
	// a reaction that exists (all answered "duplicate:").
	Imported   int64 `json:"imported"`
	Duplicates int64 `json:"duplicates"`
	// SkippedRelaySigned is the source relay's own state, regenerated here.
	SkippedRelaySigned int64 `json:"skipped_relay_signed"`
	// Refused counts the events the pipeline refused, by the prefix of
	// the reason ("invalid", "restricted", …); FirstRefused holds the
	// first refusal of each prefix as "line N: <reason>".
	Refused      map[string]int64  `json:"refused"`
	FirstRefused map[string]string `json:"first_refused,omitempty"`
}

// Stored is how many events the community holds, for the command's check
// that the target is empty.
func Stored(ctx context.Context, pool *pgxpool.Pool, communityID string) (int64, error) {
	c, err := store.New(pool).EventExportCount(ctx, communityID)
	return c.Events, err
}

// Run imports the file r, which Verify accepted with header h and trailer
// t, into p's community (docs/OPERATIONS.md "Importing a community"). Each
// event goes through the ingest pipeline in file order, authenticated as
// its author, with the pipeline's clock at the event's created_at so that
// it is judged as it was when it arrived live. A refusal is counted, not
// fatal; an internal failure stops the import, which a re-run continues
// (what is stored comes back duplicate:).
func Run(ctx context.Context, p Params, h export.Header, t export.Trailer, r io.Reader) (Summary, error) {
	if p.Now == nil {
		p.Now = time.Now
	}
	// Running relays answer REQs from a hot window filled by their own
	// ingest: while this writes, and once after, it tells them to drop the
	// community's window (docs/OPERATIONS.md "Hot window").
	st := store.New(p.Pool)
	if err := st.NotifyHotWindow(ctx, p.CommunityID); err != nil {
		return Summary{}, err
	}
	stopNotify := make(chan struct{})
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopNotify:
				return
			case <-tick.C:
				_ = st.NotifyHotWindow(ctx, p.CommunityID) // a missed one is covered by the next
			}
		}
	}()
	defer func() {
		close(stopNotify)
		<-notified
		_ = st.NotifyHotWindow(context.WithoutCancel(ctx), p.CommunityID)
	}()
	var clock atomic.Int64
	pl := ingest.New(ingest.Config{Pool: p.Pool, RelayKey: p.RelayKey, AuditEnabled: p.AuditEnabled, GroupCommitMax: 1,
		NowFunc: func() time.Time { return time.Unix(clock.Load(), 0) }})
	s := Summary{Host: p.Host, Source: h.Host, Refused: map[string]int64{}, FirstRefused: map[string]string{}}
	progress := func() {
		if p.Progress != nil {
			p.Progress(s.Events, h.Events)
		}
	}
	l := newLines(r)
	if _, err := l.header(); err != nil {
		return s, err
	}
	ten := tenant.Tenant{CommunityID: p.CommunityID, Host: p.Host}
	for {
		it, err := l.item()
		if err != nil {
			return s, err
		}
		if it.trailer != nil {
			break
		}
		ev, err := parseEvent(it)
		if err != nil {
			return s, err
		}
		s.Events++
		switch {
		case regenerated(h, &ev):
			s.SkippedRelaySigned++
		case expired(&ev, p.Now()):
			s.refuse(it.line, wire.MsgExpired)
		case ahead(&ev, p.Now()):
			s.refuse(it.line, wire.MsgClockDrift)
		default:
			clock.Store(ev.CreatedAt)
			res := pl.Submit(ctx, ingest.Request{Tenant: ten, Author: ev.PubKey, Source: ingest.SourceWebSocket, Event: ev})
			switch res.Code {
			case ingest.Accepted:
				s.Imported++
			case ingest.Duplicate, ingest.Conflict: // stored already, or the channel or reaction it makes exists
				s.Duplicates++
			case ingest.Internal:
				return s, fmt.Errorf("line %d: event %s: %s", it.line, ev.ID, res.Message)
			default:
				s.refuse(it.line, res.Message)
			}
		}
		if s.Events%Batch == 0 {
			progress()
		}
	}
	progress()
	if s.Events != t.Events {
		return s, fmt.Errorf("the file changed since it was verified: %d event lines, the trailer counts %d", s.Events, t.Events)
	}
	if p.AuditEnabled {
		if err := audit.Append(ctx, p.Pool, audit.NewCommunityImported(p.CommunityID, provenance(h, t))); err != nil {
			return s, fmt.Errorf("audit: %w", err)
		}
	}
	return s, nil
}

// refuse counts a refusal under its reason's prefix.
func (s *Summary) refuse(line int64, msg string) {
	prefix, _, _ := strings.Cut(msg, ":")
	if s.Refused[prefix] == 0 {
		s.FirstRefused[prefix] = fmt.Sprintf("line %d: %s", line, msg)
	}
	s.Refused[prefix]++
}

// regenerated reports whether ev is state the source relay signed, which
// this relay writes again, with its own key, when the events that caused
// it are replayed: the group state 39000–39002 (and the other relay-only
// kinds) and the membership notices. Without a relay pubkey in the header
// (the source relay ran with a key of its own making) the kind decides.
func regenerated(h export.Header, ev *event.Event) bool {
	if !event.RelayOnly.Has(ev.Kind) && !event.RelaySignedNotice.Has(ev.Kind) {
		return false
	}
	return h.RelayPubkey == nil || *h.RelayPubkey == ev.PubKey
}

// expired reports whether ev's NIP-40 expiration has passed by now: the
// pipeline judges an event at its created_at, so the importer checks this
// against the real clock.
func expired(ev *event.Event, now time.Time) bool {
	at, present, ok := ev.Expiration()
	return ok && present && at <= now.Unix()
}

// ahead reports whether ev is dated more than the drift the pipeline
// allows ahead of the real clock. The pipeline judges an imported event at
// its own created_at, so without this an import could store an event from
// the future, which no live door accepts and which reads bounded by the
// created-at ceiling would not see (docs/ARCHITECTURE.md "Created-at
// ceiling").
func ahead(ev *event.Event, now time.Time) bool {
	return ev.CreatedAt > now.Add(event.MaxClockDrift).Unix()
}

// provenance is the audit detail of the import: the source header's host,
// community, key, chain head and checkpoint, and the file's hash.
func provenance(h export.Header, t export.Trailer) audit.Import {
	in := audit.Import{SourceHost: h.Host, SourceCommunityID: h.CommunityID, RelayPubkey: h.RelayPubkey,
		ExportedAt: h.ExportedAt, Events: t.Events, SHA256: t.SHA256, Checkpoint: h.Checkpoint}
	if h.Audit != nil {
		in.Seq, in.Hash = &h.Audit.Seq, &h.Audit.Hash
	}
	return in
}
