// Host normalisation (docs/PROTOCOL.md §2.1): the one Normalize every part of the
// relay uses for hosts: requests, RELAY_URL, the CLI, NIP-42 relay tags and
// NIP-98 u tags.

package tenant

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

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

// Normalize maps a Host header or a URL authority to the key of its
// community, following docs/PROTOCOL.md §2.1 in order:
//
//  1. trim surrounding ASCII whitespace and ASCII-lowercase;
//  2. split an optional ":port" (IPv6 literals keep their brackets);
//  3. drop the port when it is exactly 80 or 443;
//  4. remove one trailing "." from the host name;
//  5. collapse the loopback spellings 127.0.0.1 and [::1] to localhost,
//     keeping the port;
//  6. re-join as host[:port].
//
// It returns "" (unmapped) for an empty host and for anything that cannot be
// a host: characters outside letters, digits, '-', '_' and '.', a host still
// ending in '.' after step 4, a malformed IPv6 literal, or a port that is not
// a number from 1 to 65535 (an empty port after ':' counts as none). The
// result is a fixed point: Normalize of its own result returns it
// unchanged. Safe for concurrent use.
func Normalize(h string) string {
	h = strings.ToLower(strings.Trim(h, " \t\n\v\f\r")) // ASCII only survives the checks below
	host, port, ok := splitHostPort(h)
	if !ok {
		return ""
	}
	if port == "80" || port == "443" {
		port = ""
	}
	if strings.HasPrefix(host, "[") {
		if !validIPv6Literal(host) {
			return ""
		}
	} else {
		host = strings.TrimSuffix(host, ".")
		if !validHostName(host) {
			return ""
		}
	}
	if host == "127.0.0.1" || host == "[::1]" {
		host = "localhost"
	}
	if port == "" {
		return host
	}
	return host + ":" + port
}

// splitHostPort splits h into host and an optional numeric port. An empty
// port ("host:") counts as no port, as in RFC 3986.
func splitHostPort(h string) (host, port string, ok bool) {
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", "", false
		}
		host, rest := h[:end+1], h[end+1:]
		if rest == "" {
			return host, "", true
		}
		if rest[0] != ':' {
			return "", "", false
		}
		port = rest[1:]
		return host, port, port == "" || validPort(port)
	}
	switch strings.Count(h, ":") {
	case 0:
		return h, "", true
	case 1:
		host, port, _ = strings.Cut(h, ":")
		return host, port, port == "" || validPort(port)
	}
	return "", "", false // a bare IPv6 address or junk
}

// validPort accepts 1–65535 written with ASCII digits only.
func validPort(p string) bool {
	if p == "" || len(p) > 5 || strings.Trim(p, "0123456789") != "" {
		return false
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// validHostName accepts a non-empty name of lowercase letters, digits, '-',
// '_' and '.', without a trailing '.'.
func validHostName(h string) bool {
	if h == "" || strings.HasSuffix(h, ".") {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !hostByte(h[i]) {
			return false
		}
	}
	return true
}

// hostByte reports whether c may appear in a normalised host name.
func hostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// validIPv6Literal accepts "[addr]" where addr is an IPv6 address.
func validIPv6Literal(h string) bool {
	inner, ok := strings.CutSuffix(strings.TrimPrefix(h, "["), "]")
	if !ok || !strings.Contains(inner, ":") {
		return false
	}
	return net.ParseIP(inner) != nil
}
