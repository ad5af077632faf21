package read

import (
	"errors"

	"github.com/buzz-relay/buzz/internal/event"
)

// Limits of the read engine (docs/PROTOCOL.md §7.11).
const (
	MaxLimit             = 1000
	MaxExplicitChannels  = 128
	CountFallbackMaximum = 5000
)

// errCountTooBroad is returned by count when the fallback path would need
// more than CountFallbackMaximum candidates: an exact answer or none.
var errCountTooBroad = errors.New("count filter requires narrower constraints")

// Scope is who reads, and where.
type Scope struct {
	CommunityID string
	// Reader is the authenticated pubkey, lowercase hex.
	Reader string
}

// Row is one stored event returned by a read.
type Row struct {
	// Event is the event; on a plain history read (REQ, /query) its Tags
	// are nil unless the post-filter decoded them: the tags a consumer
	// sends are in JSON.
	Event event.Event
	// Channel is the stored channel_id, "" for a global event.
	Channel string
	// JSON is the event encoded once.
	JSON []byte
}

// Access is a reader's accessible channels in one community: channels where
// it is an active member plus every open channel, deleted ones excluded.
type Access struct {
	channels map[string]struct{}
}

// newAccess builds an Access from channel ids.
func newAccess(channels []string) *Access {
	a := &Access{channels: make(map[string]struct{}, len(channels))}
	for _, c := range channels {
		a.channels[c] = struct{}{}
	}
	return a
}

// Has reports whether channel ch is accessible.
func (a *Access) Has(ch string) bool { _, ok := a.channels[ch]; return ok }

// List returns the accessible channel ids in no particular order.
func (a *Access) List() []string {
	out := make([]string, 0, len(a.channels))
	for c := range a.channels {
		out = append(out, c)
	}
	return out
}

// explicitChannels returns the number of "#h" values across filters.
func explicitChannels(filters []event.Filter) int {
	n := 0
	for i := range filters {
		n += len(filters[i].Tags["h"])
	}
	return n
}

// isChannelSubscription reports whether every filter has a non-empty "#h"
// (docs/PROTOCOL.md §7.5 step 3). A REQ with no filters is not one.
func isChannelSubscription(filters []event.Filter) bool {
	if len(filters) == 0 {
		return false
	}
	for i := range filters {
		if len(filters[i].Tags["h"]) == 0 {
			return false
		}
	}
	return true
}
