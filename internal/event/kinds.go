package event

// Kinds the core refers to by name.
const (
	KindProfile        = 0
	KindNote           = 1
	KindContacts       = 3
	KindDeletion       = 5
	KindReaction       = 7
	KindStreamMessage  = 9
	KindGiftWrap       = 1059
	KindPutUser        = 9000
	KindRemoveUser     = 9001
	KindEditMetadata   = 9002
	KindDeleteEvent    = 9005
	KindCreateGroup    = 9007
	KindDeleteGroup    = 9008
	KindJoinRequest    = 9021
	KindLeaveRequest   = 9022
	KindAgentProfile   = 10100
	KindEmojiList      = 10030
	KindEmojiSet       = 30030
	KindAppData        = 30078
	KindEngram         = 30174
	KindAuth           = 22242
	KindPresence       = 20001
	KindTyping         = 20002
	KindGroupMetadata  = 39000
	KindGroupAdmins    = 39001
	KindGroupMembers   = 39002
	KindMemberAdded    = 44100
	KindMemberRemoved  = 44101
	KindStreamMessage2 = 40002
	KindMessageEdit    = 40003
	KindForumPost      = 45001
	KindForumVote      = 45002
	KindForumComment   = 45003
	KindNIP98          = 27235
)

// KindSet is a fixed set of kinds.
type KindSet map[int]struct{}

func setOf(kinds ...int) KindSet {
	s := make(KindSet, len(kinds))
	for _, k := range kinds {
		s[k] = struct{}{}
	}
	return s
}

// Has reports whether k is in the set.
func (s KindSet) Has(k int) bool { _, ok := s[k]; return ok }

// The kind sets of docs/PROTOCOL.md §4.2. They are read-only.
var (
	PGated            = setOf(1059, 24200, 30622, 44100, 44101, 44200)
	AuthorOnly        = setOf(30300, 30350)
	ResultGated       = setOf(30622, 44200)
	GlobalOnly        = setOf(0, 1, 3, 10000, 10001, 10002, 10003, 10030, 10100, 30000, 30003, 30023, 30030, 30078, 30174, 30315)
	RequiresH         = setOf(9, 40002, 40003, 45001, 45002, 45003, 9000, 9001, 9002, 9005, 9008, 9022)
	RelayOnly         = setOf(39000, 39001, 39002, 39005, 39006, 39007, 48002)
	RelaySignedNotice = setOf(44100, 44101)
	NeverIndexed      = setOf(1059, 30174, 30179, 30300, 30350, 30622, 44100, 44101, 44200)
	// Searchable is the allowlist of the first migration's search_tsv expression.
	Searchable = setOf(0, 9, 40002, 45001, 45003)
	// ThreadKinds take part in NIP-10 thread resolution.
	ThreadKinds = setOf(9, 40002, 45001, 45003)
	// accepted are the stored kinds a client may submit (docs/PROTOCOL.md §4.1).
	accepted = setOf(0, 1, 3, 5, 7, 9, 1059,
		9000, 9001, 9002, 9005, 9007, 9008, 9021, 9022,
		10000, 10001, 10002, 10003, 10030, 10100,
		30000, 30003, 30023, 30030, 30078, 30174, 30315,
		40002, 40003, 45001, 45002, 45003)
)

// IsAccepted reports whether a client may submit stored kind k (docs/PROTOCOL.md §4.1).
func IsAccepted(k int) bool { return accepted.Has(k) }

// IsEphemeral reports whether k is in 20000–29999: fanned out, never stored.
func IsEphemeral(k int) bool { return k >= 20000 && k <= 29999 }

// IsReplaceable reports whether k is NIP-16 replaceable: 0, 3, 10000–19999.
func IsReplaceable(k int) bool { return k == 0 || k == 3 || (k >= 10000 && k <= 19999) }

// IsAddressable reports whether k is NIP-33 addressable: 30000–39999.
func IsAddressable(k int) bool { return k >= 30000 && k <= 39999 }

// IsWSOnly reports whether k may only arrive over WebSocket (1059, ephemeral).
func IsWSOnly(k int) bool { return k == KindGiftWrap || IsEphemeral(k) }

// IsNeverStored reports whether k can never be stored: AUTH, ephemeral and
// the relay's never-stored overlays.
func IsNeverStored(k int) bool {
	return k == KindAuth || IsEphemeral(k) || (k >= 39005 && k <= 39007) || k == 48002
}

// VisibleTo applies per-event visibility (docs/PROTOCOL.md §7.7), the channel check
// aside: an AuthorOnly event only to its author, a ResultGated event only
// to a reader named in a "p" tag. reader is lowercase hex.
func (e *Event) VisibleTo(reader string) bool {
	if AuthorOnly.Has(e.Kind) && e.PubKey != reader {
		return false
	}
	if ResultGated.Has(e.Kind) && !e.Tags.HasValue("p", reader) {
		return false
	}
	return true
}
