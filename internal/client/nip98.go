package client

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// NIP98Header returns the Authorization header value for one HTTP request:
// "Nostr " and the standard base64 of a kind 27235 event signed with sk,
// tagged with u=url, method (upper case) and, when body is non-empty, payload
// = the lowercase hex SHA-256 of body, and a random nonce. The relay
// accepts each token id once and for ±60 s; the nonce keeps two identical
// requests in the same second from sharing an id.
func NIP98Header(sk []byte, method, url string, body []byte) (string, error) {
	return NIP98HeaderAt(sk, method, url, body, time.Now())
}

// NIP98HeaderAt is NIP98Header with created_at set to at: a token signed
// ahead of the moment it is sent, valid while the relay's clock is within
// 60 s of at.
func NIP98HeaderAt(sk []byte, method, url string, body []byte, at time.Time) (string, error) {
	ev := event.Event{
		CreatedAt: at.Unix(),
		Kind:      event.KindNIP98,
		Tags:      event.Tags{{"u", url}, {"method", strings.ToUpper(method)}, {"nonce", nonce()}},
	}
	if len(body) > 0 {
		sum := sha256.Sum256(body)
		ev.Tags = append(ev.Tags, event.Tag{"payload", hex.EncodeToString(sum[:])})
	}
	if err := ev.Sign(sk); err != nil {
		return "", fmt.Errorf("nip-98 header: %w", err)
	}
	return "Nostr " + base64.StdEncoding.EncodeToString(ev.AppendJSON(nil)), nil
}

// nonce returns 16 random hex characters.
func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
