package read

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// The read-state snapshot: POST /query's one-call read of a reader's whole
// NIP-RS read state (a project extension beyond NIP-RS, docs/PROTOCOL.md §14.6; the
// WebSocket door does not offer it). The request is exactly one filter,
// {"kinds":[30078],"authors":[<reader>],"read_state_snapshot":1}, and the
// answer is every live conforming read-state event (docs/PROTOCOL.md §14.1) of the
// reader in the community, newest first (created_at DESC, id ASC), read by
// one SQL statement on the writer pool: one MVCC snapshot, so the set is
// the live heads of one instant. A snapshot is complete or it is refused;
// it is never cut short.

// SnapshotField is the /query filter field that asks for the snapshot.
const SnapshotField = "read_state_snapshot"

// Limits of the snapshot, advertised in NIP-11 as "read_state_snapshot".
const (
	// SnapshotVersion is the only value read_state_snapshot accepts.
	SnapshotVersion = 1
	// SnapshotMaxEvents is the most events one snapshot returns; a reader
	// with more gets SnapshotTooLarge.
	SnapshotMaxEvents = 4096
	// SnapshotMaxArrayBytes bounds the encoded events array, brackets and
	// commas included; a larger one is SnapshotTooLarge.
	SnapshotMaxArrayBytes = 8 << 20
)

// Client texts of the snapshot's refusals.
var (
	msgSnapshotOnlyFilter = wire.Reason(wire.Invalid, "read_state_snapshot must be the only filter of the request")
	msgSnapshotValue      = wire.Reason(wire.Invalid, "read_state_snapshot must be 1")
	msgSnapshotFields     = wire.Reason(wire.Invalid, "read_state_snapshot takes only kinds, authors and read_state_snapshot, got ")
	msgSnapshotKinds      = wire.Reason(wire.Invalid, "read_state_snapshot requires kinds to be exactly [30078]")
	msgSnapshotAuthors    = wire.Reason(wire.Invalid, "read_state_snapshot requires authors to be exactly one pubkey, the authenticated one")
	msgSnapshotOtherUser  = wire.Reason(wire.Restricted, "read_state_snapshot reads only the authenticated pubkey's read state")
	msgSnapshotStorage    = wire.Reason(wire.Error, "read_state_snapshot unavailable: the read-state events could not be read; retry later")
)

// Client texts of the snapshot's limits, which they name.
var (
	msgSnapshotTooMany = "read_state_snapshot too large: more than " + strconv.Itoa(SnapshotMaxEvents) + " read-state events"
	msgSnapshotTooBig  = "read_state_snapshot too large: the events exceed " + strconv.Itoa(SnapshotMaxArrayBytes) + " bytes of JSON"
)

// SnapshotCode classifies a SnapshotError, so the door maps it through one
// table.
type SnapshotCode int

const (
	// SnapshotInvalid means the request carries read_state_snapshot but is not
	// exactly the snapshot request.
	SnapshotInvalid SnapshotCode = iota + 1
	// SnapshotTooLarge means the reader's read state exceeds SnapshotMaxEvents
	// or SnapshotMaxArrayBytes.
	SnapshotTooLarge
	// SnapshotUnavailable means the statement failed, or a stored row could not
	// be turned into an event (a corrupt row).
	SnapshotUnavailable
)

// SnapshotError is every failure of ReadStateSnapshot. Reason is the exact
// client text; Err, for SnapshotUnavailable, is the cause (for the log,
// never for the client).
type SnapshotError struct {
	Code   SnapshotCode
	Reason string
	Err    error
}

func (e *SnapshotError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *SnapshotError) Unwrap() error { return e.Err }

// Snapshot is a complete read-state snapshot.
type Snapshot struct {
	// Pubkey is the reader, lowercase hex.
	Pubkey string
	// ID is the snapshot id: the lowercase hex SHA-256 of the returned
	// event ids, each as its 32 raw bytes, sorted in ascending byte order
	// and concatenated without separators (the SHA-256 of nothing for an
	// empty snapshot). Two snapshots with the same set of events have the
	// same id whatever their order; any change of the set changes it.
	ID string
	// Events are the events, newest first (created_at DESC, id ASC).
	Events []event.Event
	// EventsJSON is the encoded events array, at most
	// SnapshotMaxArrayBytes long.
	EventsJSON []byte
}

// WantsSnapshot reports whether a /query request asks for the read-state
// snapshot: some filter carries read_state_snapshot, whatever its value.
// Such a request is served by ReadStateSnapshot or refused, never read as
// a plain query.
func WantsSnapshot(filters []event.Filter) bool {
	for i := range filters {
		if _, ok := filters[i].Extra[SnapshotField]; ok {
			return true
		}
	}
	return false
}

// ReadStateSnapshot serves the read-state snapshot of sc.Reader in
// sc.CommunityID. filters must be exactly one filter
// {"kinds":[30078],"authors":[sc.Reader],"read_state_snapshot":1} (authors
// compared after ParseFilter's lowercasing). It returns a *SnapshotError
// for every failure: SnapshotInvalid for any other shape, SnapshotTooLarge
// over either limit, SnapshotUnavailable for a database failure or a
// corrupt row. Safe for concurrent use; it runs one statement and opens no
// transaction.
func (e *Engine) ReadStateSnapshot(ctx context.Context, sc Scope, conn string, filters []event.Filter) (*Snapshot, error) {
	if err := checkSnapshotRequest(sc.Reader, filters); err != nil {
		return nil, err
	}
	// Like every read, it pays read time and holds a share for its
	// statement, under the read deadline (a deadline that passes is
	// SnapshotUnavailable: the snapshot is never cut short).
	g, deadline, err := e.admit(ctx, conn, sc.Reader)
	if err != nil {
		return nil, err
	}
	defer g.close()
	octx, cancel := withDeadline(ctx, deadline)
	defer cancel()
	return e.readState(octx, sc)
}

// checkSnapshotRequest applies the snapshot's shape rules in order: one
// filter, the value 1, no other field, kinds [30078], authors [reader].
func checkSnapshotRequest(reader string, filters []event.Filter) *SnapshotError {
	invalid := func(reason string) *SnapshotError { return &SnapshotError{Code: SnapshotInvalid, Reason: reason} }
	if len(filters) != 1 {
		return invalid(msgSnapshotOnlyFilter)
	}
	f := &filters[0]
	if !bytes.Equal(bytes.TrimSpace(f.Extra[SnapshotField]), []byte("1")) {
		return invalid(msgSnapshotValue)
	}
	if others := otherFields(f); len(others) > 0 {
		return invalid(msgSnapshotFields + strings.Join(others, ", "))
	}
	if len(f.Kinds) != 1 || f.Kinds[0] != event.KindAppData {
		return invalid(msgSnapshotKinds)
	}
	if len(f.Authors) != 1 {
		return invalid(msgSnapshotAuthors)
	}
	if f.Authors[0] != reader {
		return invalid(msgSnapshotOtherUser)
	}
	return nil
}

// otherFields names the fields of f beyond kinds, authors and
// read_state_snapshot, sorted. ParseFilter puts every field it reads
// somewhere, so a field that is present, even empty, is named here.
func otherFields(f *event.Filter) []string {
	var out []string
	add := func(present bool, name string) {
		if present {
			out = append(out, name)
		}
	}
	add(f.IDs != nil, "ids")
	add(f.Since != nil, "since")
	add(f.Until != nil, "until")
	add(f.Limit != nil, "limit")
	add(f.Search != nil, "search")
	for name := range f.Tags {
		out = append(out, "#"+name)
	}
	for name := range f.Extra {
		if name != SnapshotField {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// readState reads the rows on the writer pool (store.ReadStateSnapshotRows,
// one statement, one row at a time) and builds the snapshot, stopping the
// statement at the first row past either limit, so a request holds at most
// about SnapshotMaxArrayBytes plus one row.
func (e *Engine) readState(ctx context.Context, sc Scope) (*Snapshot, error) {
	unavailable := func(err error) *SnapshotError {
		return &SnapshotError{Code: SnapshotUnavailable, Reason: msgSnapshotStorage, Err: err}
	}
	pub, err := hex.DecodeString(sc.Reader)
	if err != nil || len(pub) != 32 {
		return nil, unavailable(fmt.Errorf("reader %q is not a 64-character hex pubkey", sc.Reader))
	}
	snap := &Snapshot{Pubkey: sc.Reader, EventsJSON: []byte{'['}}
	var (
		ids     [][]byte
		stopped *SnapshotError
	)
	err = store.New(e.cfg.Pool).ReadStateSnapshotRows(ctx, sc.CommunityID, pub, SnapshotMaxArrayBytes, SnapshotMaxEvents+1,
		func(row store.ReadStateSnapshotRow) bool {
			ev := event.Event{ID: hex.EncodeToString(row.ID), PubKey: hex.EncodeToString(row.Pubkey), Sig: hex.EncodeToString(row.Sig),
				CreatedAt: row.CreatedAt.Unix(), Kind: row.Kind, Content: row.Content}
			if err := rowProblem(&ev, row.DTag, row.Tags, row.Channel); err != nil {
				stopped = unavailable(fmt.Errorf("read-state row %s: %w", ev.ID, err))
				return false
			}
			if len(snap.Events) == SnapshotMaxEvents {
				stopped = &SnapshotError{Code: SnapshotTooLarge, Reason: msgSnapshotTooMany}
				return false
			}
			if len(snap.Events) > 0 {
				snap.EventsJSON = append(snap.EventsJSON, ',')
			}
			snap.EventsJSON = ev.AppendJSON(snap.EventsJSON)
			if len(snap.EventsJSON)+1 > SnapshotMaxArrayBytes {
				stopped = &SnapshotError{Code: SnapshotTooLarge, Reason: msgSnapshotTooBig}
				return false
			}
			snap.Events = append(snap.Events, ev)
			ids = append(ids, row.ID)
			return true
		})
	if err != nil {
		return nil, unavailable(err)
	}
	if stopped != nil {
		return nil, stopped
	}
	snap.EventsJSON = append(snap.EventsJSON, ']')
	snap.ID = snapshotID(ids)
	return snap, nil
}

// rowProblem decodes a selected row's tags into ev and reports what makes
// it corrupt: tags that are not an array of arrays of strings (such a row
// cannot be sent as the event it was; see decodeTags), a verdict of the Go
// classifier that differs from the statement's, or a channel (kind 30078
// is global-only and is stored without one; a row that has one was not
// written by this relay, and whether the reader may still see that channel
// is not this read's to decide).
func rowProblem(ev *event.Event, dTag string, tags []byte, channel *string) error {
	if !event.ReadStateRow(ev.Kind, dTag, tags) {
		return fmt.Errorf("selected as read state, but event.ReadStateRow rejects d_tag %q with its tags", dTag)
	}
	t, err := decodeTags(tags)
	if err != nil {
		return fmt.Errorf("decode tags: %w", err)
	}
	ev.Tags = t
	if channel != nil {
		return fmt.Errorf("stored in channel %s, but kind 30078 is global-only", *channel)
	}
	return nil
}

// decodeTags decodes stored tags strictly: an array of arrays of strings,
// where a JSON null is an error rather than the empty tag or empty string
// encoding/json would quietly make of it.
func decodeTags(raw []byte) (event.Tags, error) {
	var loose [][]*string
	if err := json.Unmarshal(raw, &loose); err != nil {
		return nil, err
	}
	out := make(event.Tags, len(loose))
	for i, tag := range loose {
		if tag == nil {
			return nil, fmt.Errorf("tag %d is null", i)
		}
		out[i] = make(event.Tag, len(tag))
		for j, v := range tag {
			if v == nil {
				return nil, fmt.Errorf("tag %d element %d is null", i, j)
			}
			out[i][j] = *v
		}
	}
	return out, nil
}

// snapshotID is Snapshot.ID of the raw ids.
func snapshotID(ids [][]byte) string {
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, bytes.Compare)
	h := sha256.New()
	for _, id := range sorted {
		h.Write(id)
	}
	return hex.EncodeToString(h.Sum(nil))
}
