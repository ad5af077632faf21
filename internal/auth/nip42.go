package auth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// NIP42Window is the largest |now − created_at| an AUTH event may have (docs/PROTOCOL.md §7.3).
const NIP42Window = 60 * time.Second

// NewChallenge returns a fresh NIP-42 challenge: 64 lowercase hex characters
// from 32 random bytes. It panics only if the system's randomness fails.
func NewChallenge() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// NIP42Params is what an AUTH event is verified against.
type NIP42Params struct {
	// Challenge is the challenge sent on this connection.
	Challenge string
	// TenantHost is the normalised host the connection is bound to.
	TenantHost string
	// Secure selects the wss scheme (RELAY_URL is wss://); ws otherwise.
	Secure bool
	// Now is the server time the created_at window is measured from.
	Now time.Time
}

// VerifyNIP42 checks a kind 22242 AUTH event (docs/PROTOCOL.md §7.3): kind,
// a challenge tag equal to p.Challenge, a relay tag naming the tenant host
// with the expected scheme, id and Schnorr signature, and created_at within
// NIP42Window of p.Now. It returns nil when all hold. The error says which
// check failed, for logs at debug level only: the client always gets
// "auth-required: verification failed".
func VerifyNIP42(ev event.Event, p NIP42Params) error {
	if ev.Kind != event.KindAuth {
		return fmt.Errorf("verify nip-42: kind %d is not %d", ev.Kind, event.KindAuth)
	}
	// The string checks come before the hash and the Schnorr check: an AUTH
	// replayed from another connection, or made up by a flood, is refused
	// for the price of a comparison (the answer is the same whichever check
	// fails).
	if p.Challenge == "" || ev.Tags.First("challenge").Value() != p.Challenge {
		return errors.New("verify nip-42: challenge tag does not match")
	}
	if err := checkRelayTag(ev.Tags.First("relay").Value(), p.TenantHost, p.Secure); err != nil {
		return err
	}
	if _, ok := ev.CheckID(); !ok {
		return errors.New("verify nip-42: event id does not match its fields")
	}
	if !ev.VerifySignature() {
		return errors.New("verify nip-42: invalid schnorr signature")
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	drift := now.Unix() - ev.CreatedAt
	if drift < 0 {
		drift = -drift
	}
	if drift > int64(NIP42Window/time.Second) {
		return fmt.Errorf("verify nip-42: created_at is %d s from server time", drift)
	}
	return nil
}

// checkRelayTag accepts <ws|wss>://<authority>[/] whose authority normalises
// to tenantHost, without user info, query or fragment.
func checkRelayTag(raw, tenantHost string, secure bool) error {
	want := "ws"
	if secure {
		want = "wss"
	}
	if raw == "" {
		return errors.New("verify nip-42: missing relay tag")
	}
	if strings.ContainsAny(raw, "?#") {
		return errors.New("verify nip-42: relay tag has a query or fragment")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("verify nip-42: relay tag does not parse: %w", err)
	}
	if !strings.EqualFold(u.Scheme, want) || u.Opaque != "" || u.User != nil {
		return fmt.Errorf("verify nip-42: relay tag must be a %s:// URL", want)
	}
	if u.Path != "" && u.Path != "/" {
		return errors.New("verify nip-42: relay tag has a path")
	}
	if tenantHost == "" || tenant.Normalize(u.Host) != tenantHost {
		return errors.New("verify nip-42: relay tag names another host")
	}
	return nil
}
