package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/buzz-relay/buzz/internal/read"
)

// NIP-11 values of docs/PROTOCOL.md §7.12, §7.11.
const (
	nip11Name        = "Buzz Relay"
	nip11Description = "Buzz — private team communication relay"
	nip11Software    = "https://github.com/buzz-relay/buzz"
	nip11MediaType   = "application/nostr+json"

	maxSubscriptions = 1024
	maxFilters       = 10
	maxSubIDLength   = 256
	maxContentLength = 262144
)

var supportedNIPs = []int{1, 2, 9, 10, 11, 16, 17, 23, 25, 29, 33, 38, 40, 42, 45, 50, 77}

type nip11Doc struct {
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	Pubkey        *string         `json:"pubkey"`
	Contact       *string         `json:"contact"`
	SupportedNIPs []int           `json:"supported_nips"`
	Software      string          `json:"software"`
	Version       string          `json:"version"`
	Self          string          `json:"self,omitempty"`
	Limitation    nip11Limitation `json:"limitation"`
	// ReadStateSnapshot is present on hosts that map to a community only.
	ReadStateSnapshot *nip11ReadStateSnapshot `json:"read_state_snapshot,omitempty"`
}

// nip11ReadStateSnapshot advertises POST /query's read-state snapshot
// (readstate.go) and its limits.
type nip11ReadStateSnapshot struct {
	Version            int `json:"version"`
	MaxEvents          int `json:"max_events"`
	MaxEventArrayBytes int `json:"max_event_array_bytes"`
}

type nip11Limitation struct {
	MaxMessageLength int `json:"max_message_length"`
	MaxSubscriptions int `json:"max_subscriptions"`
	MaxFilters       int `json:"max_filters"`
	MaxLimit         int `json:"max_limit"`
	MaxSubIDLength   int `json:"max_subid_length"`
	MaxContentLength int `json:"max_content_length"`
	// MaxEventBytes is an extra key: the largest event, serialized with
	// its tags (BUZZ_MAX_EVENT_BYTES).
	MaxEventBytes    int  `json:"max_event_bytes,omitempty"`
	MinPowDifficulty *int `json:"min_pow_difficulty"`
	AuthRequired     bool `json:"auth_required"`
	PaymentRequired  bool `json:"payment_required"`
	RestrictedWrites bool `json:"restricted_writes"`
	// The filter caps (docs/OPERATIONS.md "Filter caps"), keys beyond
	// NIP-11's list.
	MaxFilterIDs             int `json:"max_filter_ids"`
	MaxFilterAuthors         int `json:"max_filter_authors"`
	MaxFilterKinds           int `json:"max_filter_kinds"`
	MaxFilterTagValues       int `json:"max_filter_tag_values"`
	MaxFilterTagKeys         int `json:"max_filter_tag_keys"`
	MaxSubscriptionIndexKeys int `json:"max_subscription_index_keys"`
	MaxConnectionIndexKeys   int `json:"max_connection_index_keys"`
	MaxConnectionFilterBytes int `json:"max_connection_filter_bytes"`
	// The p-tag cap and the per-user quotas (docs/OPERATIONS.md
	// "Per-user quotas"; a quota of 0 is off), and one reader's read
	// shares and read-time budget ("Read deadlines and shares"; a budget
	// of 0 is off).
	MaxPTags              int             `json:"max_p_tags"`
	RateLimits            nip11RateLimits `json:"rate_limits"`
	MaxReadsPerPubkey     int             `json:"max_reads_per_pubkey"`
	MaxReadsPerConnection int             `json:"max_reads_per_connection"`
	ReadTimePerSecondMs   int64           `json:"read_time_per_second_ms"`
	ReadTimeBurstMs       int64           `json:"read_time_burst_ms"`
}

// nip11RateLimits are the per-user quotas, with the variables' units.
type nip11RateLimits struct {
	HumanMessagesPerMin   int `json:"human_messages_per_min"`
	HumanAPICallsPerMin   int `json:"human_api_calls_per_min"`
	WSEventsPerSec        int `json:"ws_events_per_sec"`
	AgentMessagesPerMin   int `json:"agent_messages_per_min"`
	AgentAPICallsPerMin   int `json:"agent_api_calls_per_min"`
	ChannelCreatesPerHour int `json:"channel_creates_per_hour"`
}

// buildNIP11 encodes the document of a host that maps to no community
// once; it does not depend on the request.
func buildNIP11(cfg Config) []byte { return encodeNIP11(nip11Of(cfg)) }

// communityNIP11 is the document of a host that maps to a community: the
// same, plus read_state_snapshot. It is encoded per request, since the
// Server keeps one encoded document.
func communityNIP11(cfg Config) []byte {
	doc := nip11Of(cfg)
	doc.ReadStateSnapshot = &nip11ReadStateSnapshot{
		Version:            read.SnapshotVersion,
		MaxEvents:          read.SnapshotMaxEvents,
		MaxEventArrayBytes: read.SnapshotMaxArrayBytes,
	}
	return encodeNIP11(doc)
}

// nip11Of is the document's content.
func nip11Of(cfg Config) nip11Doc {
	caps := read.Caps{}
	if cfg.Reader != nil {
		caps = cfg.Reader.Caps()
	}
	q, rl := cfg.Settings.Admission, cfg.Settings.Reads
	return nip11Doc{
		Name:          nip11Name,
		Description:   nip11Description,
		SupportedNIPs: supportedNIPs,
		Software:      nip11Software,
		Version:       cfg.Version,
		Self:          cfg.RelayPubkey,
		Limitation: nip11Limitation{
			MaxMessageLength: cfg.Settings.MaxFrameBytes,
			MaxSubscriptions: maxSubscriptions,
			MaxFilters:       maxFilters,
			MaxLimit:         read.MaxLimit,
			MaxSubIDLength:   maxSubIDLength,
			MaxContentLength: maxContentLength,
			MaxEventBytes:    cfg.Settings.Bytes.MaxEventBytes,
			AuthRequired:     true,
			PaymentRequired:  false,
			RestrictedWrites: true,

			MaxFilterIDs:             caps.MaxIDs,
			MaxFilterAuthors:         caps.MaxAuthors,
			MaxFilterKinds:           caps.MaxKinds,
			MaxFilterTagValues:       caps.MaxTagValues,
			MaxFilterTagKeys:         caps.MaxTagKeys,
			MaxSubscriptionIndexKeys: cfg.Settings.Filters.SubMaxIndexKeys,
			MaxConnectionIndexKeys:   cfg.Settings.Filters.ConnMaxIndexKeys,
			MaxConnectionFilterBytes: cfg.Settings.Filters.ConnMaxFilterBytes,

			MaxPTags: q.MaxPTags,
			RateLimits: nip11RateLimits{
				HumanMessagesPerMin: q.HumanMessagesPerMin, HumanAPICallsPerMin: q.HumanAPICallsPerMin,
				WSEventsPerSec: q.HumanWSEventsPerSec, AgentMessagesPerMin: q.AgentMessagesPerMin,
				AgentAPICallsPerMin: q.AgentAPICallsPerMin, ChannelCreatesPerHour: q.ChannelCreatesPerHour,
			},
			MaxReadsPerPubkey:     rl.PerPubkey,
			MaxReadsPerConnection: rl.PerConnection,
			ReadTimePerSecondMs:   rl.TimePerSecond.Milliseconds(),
			ReadTimeBurstMs:       rl.TimeBurst.Milliseconds(),
		},
	}
}

// encodeNIP11 encodes a document.
func encodeNIP11(doc nip11Doc) []byte {
	enc, err := json.Marshal(doc)
	if err != nil {
		panic("httpapi: encode NIP-11 document: " + err.Error()) // fixed types: cannot happen
	}
	return enc
}

// serveNIP11 answers GET and HEAD with the NIP-11 document and OPTIONS with
// the NIP-11 preflight, for any host, mapped or not, and always with
// Access-Control-Allow-Origin: * whatever CORSOrigins says. Only a host
// that resolves to a community gets read_state_snapshot: the snapshot is a
// community read, and a host whose lookup fails is answered as unmapped.
func (s *Server) serveNIP11(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		doc := s.nip11
		if _, err := s.cfg.Resolver.Resolve(r.Context(), r.Host); err == nil {
			doc = communityNIP11(s.cfg)
		}
		h.Set("Content-Type", nip11MediaType)
		_, _ = w.Write(doc)
	case http.MethodOptions:
		h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "*")
		w.WriteHeader(http.StatusNoContent)
	default:
		h.Set("Allow", "GET, HEAD, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}
