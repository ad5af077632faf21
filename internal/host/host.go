// Package host normalises HTTP hosts into tenant hosts (spec 10 §2.1).
//
// It owns the one Normalize function every part of the relay uses for hosts:
// requests, RELAY_URL, the CLI, NIP-42 relay tags and NIP-98 u tags. It does
// NOT resolve hosts to communities (the store does).
package host

import (
	"net/url"
	"strings"
)

// Normalize applies spec 10 §2.1: trim ASCII whitespace, lowercase, split an
// optional port (IPv6 literals keep their brackets), drop ports 80 and 443,
// remove one trailing dot, collapse 127.0.0.1 and [::1] to localhost, and
// re-join. It returns "" for an empty or malformed host (unmapped).
func Normalize(h string) string {
	h = strings.ToLower(strings.Trim(h, " \t\r\n\v\f"))
	if h == "" {
		return ""
	}
	name, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return ""
		}
		name, port = h[:end+1], h[end+1:]
		if port != "" {
			if port[0] != ':' {
				return ""
			}
			port = port[1:]
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if strings.Count(h, ":") > 1 {
			return "" // a bare IPv6 literal without brackets is not a Host
		}
		name, port = h[:i], h[i+1:]
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return ""
		}
	}
	if port == "80" || port == "443" {
		port = ""
	}
	name = strings.TrimSuffix(name, ".")
	if strings.HasSuffix(name, ".") {
		return "" // "a.." is not a host name
	}
	if name == "127.0.0.1" || name == "[::1]" {
		name = "localhost"
	}
	if name == "" || strings.ContainsAny(name, "/?#@\\") {
		return ""
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] == 0x7f {
			return ""
		}
	}
	if port != "" {
		return name + ":" + port
	}
	return name
}

// FromURL returns the scheme and the normalised authority of a URL, or ok
// false when it does not parse or has no host.
func FromURL(raw string) (scheme, authority string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return "", "", false
	}
	a := Normalize(u.Host)
	return strings.ToLower(u.Scheme), a, a != ""
}

// Tenant is the community a request is bound to, chosen from its Host.
type Tenant struct {
	// CommunityID is the community's UUID (lowercase, hyphenated).
	CommunityID string
	// Host is the normalised host the request actually used (an alias stays
	// the alias); NIP-42 and NIP-98 URL checks compare against it.
	Host string
}
