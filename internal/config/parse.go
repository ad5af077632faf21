package config

import (
	"encoding/hex"
	"fmt"
	"iter"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// loader reads variables and keeps the first error; later reads still return
// defaults so Load can finish building the value it then discards.
type loader struct {
	getenv func(string) string
	err    error
}

// get returns the trimmed value of name; "" means unset.
func (l *loader) get(name string) string {
	return strings.TrimSpace(l.getenv(name))
}

// fail records an invalid value of name unless an earlier one was recorded.
func (l *loader) fail(name, format string, args ...any) {
	if l.err == nil {
		l.err = &Error{Variable: name, Reason: fmt.Sprintf(format, args...)}
	}
}

func (l *loader) str(name, def string) string {
	if v := l.get(name); v != "" {
		return v
	}
	return def
}

// integer parses a decimal integer in [lo, hi].
func (l *loader) integer(name string, def, lo, hi int) int {
	raw := l.get(name)
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		l.fail(name, "must be an integer between %d and %d (got %q)", lo, hi, raw)
		return def
	}
	return n
}

// decimal parses a decimal number in [lo, hi].
func (l *loader) decimal(name string, def, lo, hi float64) float64 {
	raw := l.get(name)
	if raw == "" {
		return def
	}
	n, err := strconv.ParseFloat(raw, 64)
	if err != nil || !(n >= lo && n <= hi) {
		l.fail(name, "must be a number between %g and %g (got %q)", lo, hi, raw)
		return def
	}
	return n
}

// boolean parses true|false|1|0|yes|no|on|off, case-insensitive, and reports
// whether the variable was set.
func (l *loader) boolean(name string, def bool) (value, set bool) {
	raw := l.get(name)
	if raw == "" {
		return def, false
	}
	switch strings.ToLower(raw) {
	case "true", "1", "yes", "on":
		return true, true
	case "false", "0", "no", "off":
		return false, true
	}
	l.fail(name, "must be one of true, false, 1, 0, yes, no, on, off (got %q)", raw)
	return def, true
}

// auditEnabled reads BUZZ_AUDIT_ENABLED (docs/PROTOCOL.md §13.8): the booleans of
// boolean, default true, and its own message for anything else.
func (l *loader) auditEnabled(name string) bool {
	raw := l.get(name)
	switch strings.ToLower(raw) {
	case "", "true", "1", "yes", "on":
		return true
	case "false", "0", "no", "off":
		return false
	}
	l.fail(name, "%q is not a boolean (use true or false)", raw)
	return true
}

func (l *loader) oneOf(name, def string, allowed ...string) string {
	raw := l.get(name)
	if raw == "" {
		return def
	}
	if v := strings.ToLower(raw); slices.Contains(allowed, v) {
		return v
	}
	l.fail(name, "must be one of %s (got %q)", strings.Join(allowed, ", "), raw)
	return def
}

func (l *loader) logLevel(name string) slog.Level {
	switch l.oneOf(name, "info", "debug", "info", "warn", "error") {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// bindAddr checks host:port with a numeric port 0–65535 (0 = any free port).
func (l *loader) bindAddr(name, def string) string {
	raw := l.get(name)
	if raw == "" {
		return def
	}
	_, port, err := net.SplitHostPort(raw)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 0 || n > 65535 {
		l.fail(name, "must be host:port with a port between 0 and 65535 (got %q)", raw)
		return def
	}
	return raw
}

// relayURL checks RELAY_URL and returns its scheme and normalised host.
func (l *loader) relayURL(name, raw string) (scheme, host string) {
	u, err := url.Parse(raw)
	switch {
	case err == nil && u.User != nil:
		l.fail(name, "must not contain credentials")
	case err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" || u.Opaque != "":
		l.fail(name, "must be a ws:// or wss:// URL with a host (got %q)", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		l.fail(name, "must not have a query or fragment (got %q)", raw)
	case NormalizeHost(u.Host) == "":
		l.fail(name, "has an empty host (got %q)", raw)
	default:
		return u.Scheme, NormalizeHost(u.Host)
	}
	return "", ""
}

// postgresURL accepts a postgres:// or postgresql:// URL or a libpq key=value
// string. The value is never echoed: it may hold a password.
func (l *loader) postgresURL(name string) string {
	raw := l.get(name)
	if raw == "" {
		return ""
	}
	scheme, _, isURL := strings.Cut(raw, "://")
	switch {
	case isURL && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")):
		return raw
	case !isURL && strings.Contains(raw, "="):
		return raw
	}
	l.fail(name, "must be a postgres:// or postgresql:// URL or a key=value connection string")
	return ""
}

// redisURL accepts a redis:// or rediss:// URL; the value is never echoed.
func (l *loader) redisURL(name string) string {
	raw := l.get(name)
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Opaque != "" {
		l.fail(name, "must be a redis:// or rediss:// URL")
		return ""
	}
	return raw
}

// privateKey decodes 64 hex characters into a valid secp256k1 secret key.
// The value is never echoed.
func (l *loader) privateKey(name string) []byte {
	raw := l.get(name)
	if raw == "" {
		return nil
	}
	if strings.HasPrefix(strings.ToLower(raw), "nsec1") {
		l.fail(name, "must be 64 hex characters (nsec keys are not accepted)")
		return nil
	}
	key, err := hex.DecodeString(raw)
	if err != nil || len(key) != 32 {
		l.fail(name, "must be 64 hex characters (got %d characters)", len(raw))
		return nil
	}
	if d := new(big.Int).SetBytes(key); d.Sign() == 0 || d.Cmp(secp256k1N) >= 0 {
		l.fail(name, "is not a valid secp256k1 private key")
		return nil
	}
	return key
}

// pubkey checks 64 hex characters of a valid x-only key and lowercases them.
func (l *loader) pubkey(name string) string {
	raw := l.get(name)
	if raw == "" {
		return ""
	}
	if strings.HasPrefix(strings.ToLower(raw), "npub1") {
		l.fail(name, "must be 64 hex characters (npub keys are not accepted)")
		return ""
	}
	key, err := hex.DecodeString(raw)
	if err != nil || len(key) != 32 {
		l.fail(name, "must be 64 hex characters (got %q)", raw)
		return ""
	}
	if !onCurve(key) {
		l.fail(name, "is not a valid x-only public key (got %q)", raw)
		return ""
	}
	return strings.ToLower(raw)
}

// origins parses a comma-separated list of scheme://host[:port] origins.
// Blank entries are skipped; a trailing "/" is dropped.
func (l *loader) origins(name string) []string {
	var out []string
	for entry := range listEntries(l.get(name)) {
		origin, ok := parseOrigin(entry)
		if !ok {
			l.fail(name, "entry %q is not an origin (want scheme://host[:port])", entry)
			return nil
		}
		if !slices.Contains(out, origin) {
			out = append(out, origin)
		}
	}
	return out
}

// parseOrigin returns the lowercase scheme://host[:port] form of s.
func parseOrigin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", false
	}
	if strings.HasSuffix(u.Host, ":") { // "https://a:" has an empty port
		return "", false
	}
	if _, bad := strayBracket(u); bad {
		return "", false
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), true
}

// secp256k1 curve parameters: field prime p and group order n.
var (
	secp256k1P, _ = new(big.Int).SetString("fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f", 16)
	secp256k1N, _ = new(big.Int).SetString("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", 16)
)

// onCurve reports whether x (32 bytes, big-endian) is the x coordinate of a
// point on secp256k1, as BIP-340 requires of an x-only public key.
func onCurve(x []byte) bool {
	xi := new(big.Int).SetBytes(x)
	if xi.Cmp(secp256k1P) >= 0 {
		return false
	}
	y2 := new(big.Int).Exp(xi, big.NewInt(3), secp256k1P)
	y2.Add(y2, big.NewInt(7)).Mod(y2, secp256k1P)
	return new(big.Int).ModSqrt(y2, secp256k1P) != nil
}

const redacted = "REDACTED"

var (
	dsnPassword   = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)
	queryPassword = regexp.MustCompile(`(?i)([?&](?:ssl)?password=)[^&#]*`)
)

// redactURL replaces the password of a URL's user info, password= query
// parameters and password= keywords of a key=value string with REDACTED.
// It works on the text, so it also redacts values url.Parse rejects.
func redactURL(raw string) string {
	scheme, rest, isURL := strings.Cut(raw, "://")
	if !isURL {
		return dsnPassword.ReplaceAllString(raw, "${1}"+redacted)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(authority[:at], ":"); hasPass {
			authority = user + ":" + redacted + authority[at:]
		}
	}
	return scheme + "://" + authority + queryPassword.ReplaceAllString(tail, "${1}"+redacted)
}

// prefixes parses a comma-separated list of IP addresses and CIDR prefixes
// (an address is its own /32 or /128). Blank entries are skipped.
func (l *loader) prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for entry := range listEntries(l.get(name)) {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			a, aerr := netip.ParseAddr(entry)
			if aerr != nil || a.Zone() != "" {
				l.fail(name, "entry %q is not an IP address or CIDR prefix", entry)
				return nil
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out
}

// listEntries yields the entries of a comma-separated list, trimmed,
// skipping blank ones.
func listEntries(raw string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for entry := range strings.SplitSeq(raw, ",") {
			if entry = strings.TrimSpace(entry); entry != "" && !yield(entry) {
				return
			}
		}
	}
}
