package window

// ChannelRequest is one channel window after parsing
// (docs/NIP-CW.md §3.1).
type ChannelRequest struct {
	// Channel is the canonical (lowercase) channel UUID.
	Channel string
	// Limit is the row budget, clamped into 1..200.
	Limit int
	// Kinds restricts row kinds; nil means every kind.
	Kinds []int
	// Cursor is nil for a head request.
	Cursor           *Cursor
	IncludeAux       bool
	IncludeSummaries bool
}

// ResolveRequest is one summary-recovery filter after parsing
// (docs/NIP-CW.md §4).
type ResolveRequest struct {
	Channel string
	// Targets are the lowercase reply ids, 1 to 100.
	Targets []string
}

// Scope is who reads a channel window, where, and what they may see.
type Scope struct {
	CommunityID string
	// Reader is the authenticated pubkey, lowercase hex.
	Reader string
	// Accessible reports whether the reader may read a channel (the read
	// door's accessible set, with the request's confirmed channels).
	Accessible func(channel string) bool
}
