package event

// ExpirationTag is the NIP-40 tag name: ["expiration", "<unix seconds>"].
const ExpirationTag = "expiration"

// MaxExpirationDigits bounds an expiration value: at most 12 decimal
// digits (about the year 33658), so a value in milliseconds by mistake is
// refused instead of read as a date in the far future.
const MaxExpirationDigits = 12

// Expiration returns the event's NIP-40 expiration (docs/PROTOCOL.md §6.6):
// present is false when no tag is named "expiration"; ok is false when the
// tags are malformed: more than one expiration tag, or a value that is not
// 1–MaxExpirationDigits ASCII digits (no sign, no fraction, no spaces).
// Elements after the value are ignored.
func (e *Event) Expiration() (at int64, present, ok bool) {
	for _, t := range e.Tags {
		if len(t) == 0 || t[0] != ExpirationTag {
			continue
		}
		if present {
			return 0, true, false
		}
		present = true
		v, good := parseExpiration(t.Value())
		if !good {
			return 0, true, false
		}
		at = v
	}
	return at, present, true
}

func parseExpiration(s string) (int64, bool) {
	if len(s) == 0 || len(s) > MaxExpirationDigits {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
