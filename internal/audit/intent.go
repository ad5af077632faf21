package audit

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/buzz-relay/buzz/internal/pg"
)

// Intent is one action waiting to be chained: an audit_outbox row. Build it
// with the constructors below, which fill the dedupe key and a detail with
// every key of docs/PROTOCOL.md §13.3 from typed fields, so canonicalisation cannot
// fail later.
type Intent struct {
	CommunityID string
	DedupeKey   string
	Action      Action
	// Actor is the principal, lowercase hex; "" stores NULL.
	Actor string
	// ObjectID is nil for NULL.
	ObjectID *string
	// Detail is the detail object as JSON.
	Detail []byte
	// OccurredAt is the instant of the action; zero lets PostgreSQL set
	// clock_timestamp(). Only summaries set it (to their window's end).
	OccurredAt time.Time
}

// ActorBytes is the actor pubkey as stored: nil for none.
func (in Intent) ActorBytes() []byte {
	if in.Actor == "" {
		return nil
	}
	b, err := hex.DecodeString(in.Actor)
	if err != nil || len(b) != 32 {
		return nil
	}
	return b
}

// Append writes the intent into audit_outbox inside the caller's
// transaction q, so it commits or rolls back with the change it records.
// A pending intent with the same dedupe key makes it a no-op. A failure is
// an *IntentError: the caller must roll back and count a send error.
func Append(ctx context.Context, q pg.Querier, in Intent) error {
	var occurred *time.Time
	if !in.OccurredAt.IsZero() {
		t := in.OccurredAt.UTC().Truncate(time.Microsecond)
		occurred = &t
	}
	_, err := q.Exec(ctx, `INSERT INTO audit_outbox (community_id, dedupe_key, action, actor_pubkey, object_id, detail, occurred_at)
		VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, clock_timestamp()))
		ON CONFLICT (community_id, dedupe_key) DO NOTHING`,
		in.CommunityID, in.DedupeKey, string(in.Action), in.ActorBytes(), in.ObjectID, string(in.Detail), occurred)
	if err != nil {
		return &IntentError{err: err}
	}
	return nil
}

func strp(s string) *string { return &s }

// nullable is "" → JSON null.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("audit: detail of typed fields failed to encode: " + err.Error())
	}
	return b
}

// NewEventCreated is the intent of a stored event row (client event,
// relay-signed follow-up or group state). actor is the principal who caused
// it, never the event's declared author; channel "" is null.
func NewEventCreated(communityID, actor, eventID string, kind int, channel string) Intent {
	return Intent{CommunityID: communityID, DedupeKey: "event_created:" + eventID, Action: EventCreated,
		Actor: actor, ObjectID: strp(eventID), Detail: EventCreatedDetail(kind, channel)}
}

// EventCreatedDetail is {"event_kind":int,"channel_id":uuid|null}.
func EventCreatedDetail(kind int, channel string) []byte {
	return mustJSON(struct {
		EventKind int     `json:"event_kind"`
		ChannelID *string `json:"channel_id"`
	}{kind, nullable(channel)})
}

// NewEventDeleted is the intent of one event soft-deleted by a NIP-09 kind 5
// or a 9005.
func NewEventDeleted(communityID, actor, targetID string, targetKind int, channel, deletionID string, deletionKind int) Intent {
	return Intent{CommunityID: communityID, DedupeKey: "event_deleted:" + targetID, Action: EventDeleted,
		Actor: actor, ObjectID: strp(targetID), Detail: mustJSON(struct {
			EventKind       int     `json:"event_kind"`
			ChannelID       *string `json:"channel_id"`
			DeletionEventID string  `json:"deletion_event_id"`
			DeletionKind    int     `json:"deletion_kind"`
		}{targetKind, nullable(channel), deletionID, deletionKind})}
}

// NewChannelCreated is the intent of a 9007.
func NewChannelCreated(communityID, actor, channel, channelType, visibility, eventID string) Intent {
	return Intent{CommunityID: communityID, DedupeKey: "channel_created:" + channel, Action: ChannelCreated,
		Actor: actor, ObjectID: strp(channel), Detail: mustJSON(struct {
			ChannelType string  `json:"channel_type"`
			Visibility  string  `json:"visibility"`
			EventID     *string `json:"event_id"`
		}{channelType, visibility, nullable(eventID)})}
}

// NewChannelUpdated is the intent of a 9002: the names of the changed
// fields, sorted, never their values.
func NewChannelUpdated(communityID, actor, channel string, changes []string, eventID string) Intent {
	changes = append([]string{}, changes...)
	sort.Strings(changes)
	key := eventID
	if key == "" {
		key = uuid.NewString()
	}
	return Intent{CommunityID: communityID, DedupeKey: "channel_updated:" + key, Action: ChannelUpdated,
		Actor: actor, ObjectID: strp(channel), Detail: mustJSON(struct {
			Changes []string `json:"changes"`
			EventID *string  `json:"event_id"`
		}{changes, nullable(eventID)})}
}

// NewChannelDeleted is the intent of a 9008.
func NewChannelDeleted(communityID, actor, channel, eventID string) Intent {
	return Intent{CommunityID: communityID, DedupeKey: "channel_deleted:" + channel, Action: ChannelDeleted,
		Actor: actor, ObjectID: strp(channel), Detail: mustJSON(struct {
			EventID *string `json:"event_id"`
		}{nullable(eventID)})}
}

// MemberChange describes a membership change: Scope "channel" (with
// Channel) or "relay"; EventID "" when no event caused it (operator CLI).
type MemberChange struct {
	Scope        string
	Channel      string
	Member       string
	Role         string
	PreviousRole string // "" = null
	Reason       string // removals: "removed" or "left"
	EventID      string
}

func (m MemberChange) dedupe(action Action) string {
	key := m.EventID
	if key == "" {
		key = uuid.NewString()
	}
	return string(action) + ":" + key + ":" + m.Member
}

// NewMemberAdded is the intent of a membership added or a role changed.
func NewMemberAdded(communityID, actor string, m MemberChange) Intent {
	return Intent{CommunityID: communityID, DedupeKey: m.dedupe(MemberAdded), Action: MemberAdded,
		Actor: actor, ObjectID: strp(m.Member), Detail: mustJSON(struct {
			Scope        string  `json:"scope"`
			ChannelID    *string `json:"channel_id"`
			Role         string  `json:"role"`
			PreviousRole *string `json:"previous_role"`
			EventID      *string `json:"event_id"`
		}{m.Scope, nullable(m.Channel), m.Role, nullable(m.PreviousRole), nullable(m.EventID)})}
}

// NewMemberRemoved is the intent of a membership removed.
func NewMemberRemoved(communityID, actor string, m MemberChange) Intent {
	return Intent{CommunityID: communityID, DedupeKey: m.dedupe(MemberRemoved), Action: MemberRemoved,
		Actor: actor, ObjectID: strp(m.Member), Detail: mustJSON(struct {
			Scope     string  `json:"scope"`
			ChannelID *string `json:"channel_id"`
			Reason    string  `json:"reason"`
			EventID   *string `json:"event_id"`
		}{m.Scope, nullable(m.Channel), m.Reason, nullable(m.EventID)})}
}

// newObservation is an auth or rate-limit intent with a random dedupe key.
func newObservation(communityID string, action Action, actor string, detail []byte) Intent {
	return Intent{CommunityID: communityID, DedupeKey: string(action) + ":" + uuid.NewString(), Action: action,
		Actor: actor, Detail: detail}
}

// Import is the provenance of a community import (docs/OPERATIONS.md
// "Importing a community"): the export header's source and chain head,
// and the file's count and SHA-256.
type Import struct {
	SourceHost        string
	SourceCommunityID string
	RelayPubkey       *string // nil: the source had no relay key
	ExportedAt        string
	Seq               *int64  // nil: the source chain was empty
	Hash              *string // with Seq
	Checkpoint        json.RawMessage
	Events            int64
	SHA256            string
}

// NewCommunityImported is the intent of an import into the community. Its
// dedupe key is the file's hash and source, so importing the same file
// again records nothing more.
func NewCommunityImported(communityID string, in Import) Intent {
	checkpoint := in.Checkpoint
	if len(checkpoint) == 0 {
		checkpoint = json.RawMessage("null")
	}
	return Intent{CommunityID: communityID, DedupeKey: string(CommunityImported) + ":" + in.SourceCommunityID + ":" + in.SHA256,
		Action: CommunityImported, ObjectID: strp(in.SourceCommunityID), Detail: mustJSON(struct {
			SourceHost  string          `json:"source_host"`
			RelayPubkey *string         `json:"source_relay_pubkey"`
			ExportedAt  string          `json:"exported_at"`
			AuditSeq    *int64          `json:"audit_seq"`
			AuditHash   *string         `json:"audit_hash"`
			Checkpoint  json.RawMessage `json:"checkpoint"`
			Events      int64           `json:"events"`
			SHA256      string          `json:"sha256"`
		}{in.SourceHost, in.RelayPubkey, in.ExportedAt, in.Seq, in.Hash, checkpoint, in.Events, in.SHA256})}
}
