package config

import (
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults and bounds of the operator-listener variables (docs/PROTOCOL.md §15.2).
const (
	DefaultOperatorListenerTimeout = 5000 * time.Millisecond
	minOperatorListenerTimeoutMS   = 100
	maxOperatorListenerTimeoutMS   = 10000
)

// OperatorListener is one entry of BUZZ_OPERATOR_LISTENERS (docs/PROTOCOL.md §15.2): a
// companion service that receives mention notifications.
type OperatorListener struct {
	// Pubkey is the listener's identity, 64 lowercase hex characters of a
	// valid x-only secp256k1 key. It signs the listener's registration calls.
	Pubkey string
	// URL is the HTTPS delivery URL in normalized form: lowercase scheme and
	// host, no default port 443, "/" for an empty path, no user info, query
	// or fragment. This exact string is the request target and the NIP-98 u.
	URL string
}

// listeners parses BUZZ_OPERATOR_LISTENERS: "<hex pubkey>:<https url>" entries
// separated by ";". Blank means unset (nil: the feature is off). The first
// failure in the order of docs/PROTOCOL.md §15.2 is recorded; the result is then nil.
func (l *loader) listeners(name string) []OperatorListener {
	raw := l.get(name)
	if raw == "" {
		return nil
	}
	if !utf8.ValidString(raw) {
		l.fail(name, "must be valid UTF-8")
		return nil
	}
	var entries []string
	for entry := range strings.SplitSeq(raw, ";") {
		if entry = strings.TrimSpace(entry); entry != "" {
			entries = append(entries, entry)
		}
	}
	if len(entries) == 0 {
		l.fail(name, "must contain pubkey:delivery_url pairs")
		return nil
	}
	out := make([]OperatorListener, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for _, entry := range entries {
		pubkey, endpoint, ok := strings.Cut(entry, ":")
		pubkey, endpoint = strings.TrimSpace(pubkey), strings.TrimSpace(endpoint)
		if !ok || pubkey == "" || endpoint == "" {
			l.fail(name, "entries must be pubkey:delivery_url pairs")
			return nil
		}
		if !validPubkey(pubkey) {
			l.fail(name, "entry has an invalid pubkey: %s", pubkey)
			return nil
		}
		u, err := parseDeliveryURL(endpoint)
		if err != nil {
			l.fail(name, "%s", err)
			return nil
		}
		pubkey = strings.ToLower(pubkey)
		if seen[pubkey] {
			l.fail(name, "contains duplicate pubkey: %s", pubkey)
			return nil
		}
		seen[pubkey] = true
		out = append(out, OperatorListener{Pubkey: pubkey, URL: u})
	}
	return out
}

// validPubkey reports whether s is 64 hex characters, either case, of a
// valid x-only public key.
func validPubkey(s string) bool {
	key, err := hex.DecodeString(s)
	return err == nil && len(key) == 32 && onCurve(key)
}

// parseDeliveryURL checks one listener URL and returns its normalized form.
// The error is the reason of docs/PROTOCOL.md §15.2, without the variable name; it never
// repeats the URL itself.
func parseDeliveryURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// *url.Error quotes the whole URL; keep only the parser's reason.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return "", errors.New("endpoint is not a valid URL: " + err.Error())
	}
	if c, bad := strayBracket(u); bad {
		return "", errors.New("endpoint is not a valid URL: invalid character " + strconv.Quote(c) + " in host name")
	}
	host, ok := normalizeAuthority(u.Host, "443")
	if !ok {
		return "", errors.New("endpoint is not a valid URL: invalid port " + strconv.Quote(u.Host[strings.LastIndex(u.Host, ":"):]) + " after host")
	}
	if u.Scheme != "https" || u.Opaque != "" || u.Hostname() == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#") {
		return "", errors.New("endpoints must be HTTPS URLs without credentials, query, or fragment")
	}
	n := url.URL{Scheme: "https", Host: host, Path: u.Path, RawPath: u.RawPath}
	if n.Path == "" {
		n.Path, n.RawPath = "/", ""
	}
	return n.String(), nil
}

// strayBracket reports a "[" or "]" in a parsed URL's host name. net/url
// checks brackets only around an IPv6 literal at the start of the host, so
// "https://]:0" parses with host "]", which is no host at all.
func strayBracket(u *url.URL) (string, bool) {
	if i := strings.IndexAny(u.Hostname(), "[]"); i >= 0 {
		return u.Hostname()[i : i+1], true
	}
	return "", false
}

// normalizeAuthority lowercases host[:port] and drops an empty port or the
// scheme's default port; a port is written without leading zeros. It reports
// false for a port above 65535 (net/url checks only that it is digits).
func normalizeAuthority(hostport, defaultPort string) (string, bool) {
	host, port := hostport, ""
	if i := strings.LastIndex(hostport, ":"); i >= 0 && !strings.Contains(hostport[i:], "]") {
		host, port = hostport[:i], hostport[i+1:]
	}
	host = strings.ToLower(host)
	if port == "" {
		return host, true
	}
	n, err := strconv.Atoi(port)
	if err != nil || n > 65535 {
		return "", false
	}
	if port = strconv.Itoa(n); port == defaultPort {
		return host, true
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port), true
}

// listenerTimeout reads BUZZ_OPERATOR_LISTENER_TIMEOUT_MS, milliseconds in
// 100..=10000, default 5000.
func (l *loader) listenerTimeout(name string) time.Duration {
	raw := l.get(name)
	if raw == "" {
		return DefaultOperatorListenerTimeout
	}
	ms, err := strconv.Atoi(raw)
	if err != nil || ms < minOperatorListenerTimeoutMS || ms > maxOperatorListenerTimeoutMS {
		l.fail(name, "must be an integer in %d..=%d", minOperatorListenerTimeoutMS, maxOperatorListenerTimeoutMS)
		return DefaultOperatorListenerTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// operatorOrigin reads RELAY_OPERATOR_API_ORIGIN: http(s)://host[:port] with
// no path but "/", no query, fragment or credentials. The value is kept as
// given, without one trailing "/". Blank means unset ("").
func (l *loader) operatorOrigin(name string) string {
	raw := l.get(name)
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" ||
		u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#") {
		l.fail(name, "must be an http(s) origin without path, query, fragment, or credentials")
		return ""
	}
	if _, bad := strayBracket(u); bad {
		l.fail(name, "must be an http(s) origin without path, query, fragment, or credentials")
		return ""
	}
	if _, ok := normalizeAuthority(u.Host, ""); !ok || strings.HasSuffix(u.Host, ":") {
		l.fail(name, "must be an http(s) origin without path, query, fragment, or credentials")
		return ""
	}
	return strings.TrimSuffix(raw, "/")
}
