package event

import "strings"

// ChannelID returns s lowercased when it is a hyphenated UUID of either case
// (the form of a channel id in an h tag, docs/PROTOCOL.md §4.3), and ok false otherwise.
func ChannelID(s string) (id string, ok bool) {
	if len(s) != 36 {
		return "", false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
				return "", false
			}
		}
	}
	return strings.ToLower(s), true
}
