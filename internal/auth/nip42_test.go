package auth

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

func TestNewChallenge(t *testing.T) {
	t.Parallel()
	a, b := NewChallenge(), NewChallenge()
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{64}$`), a)
	require.NotEqual(t, a, b)
}

func TestVerifyNIP42(t *testing.T) {
	t.Parallel()
	key := eventtest.NewKey()
	now := time.Now()
	challenge := NewChallenge()
	params := NIP42Params{Challenge: challenge, TenantHost: "a.test", Now: now}
	sign := func(t *testing.T, kind int, opts ...eventtest.Option) event.Event {
		return key.Signed(t, kind, opts...)
	}
	authEvent := func(t *testing.T, relay string, opts ...eventtest.Option) event.Event {
		opts = append([]eventtest.Option{eventtest.Tag("relay", relay), eventtest.Tag("challenge", challenge)}, opts...)
		return sign(t, event.KindAuth, opts...)
	}

	accepted := map[string]string{
		"Plain":         "ws://a.test",
		"Slash":         "ws://a.test/",
		"UpperCase":     "WS://A.TEST",
		"DefaultPort":   "ws://a.test:80",
		"TrailingDot":   "ws://a.test.",
		"HTTPSPortDrop": "ws://a.test:443/",
	}
	for name, relay := range accepted {
		t.Run("Accepts"+name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, VerifyNIP42(authEvent(t, relay), params))
		})
	}

	rejectedRelays := map[string]string{
		"OtherHost": "ws://b.test",
		"WSS":       "wss://a.test",
		"HTTP":      "http://a.test",
		"Path":      "ws://a.test/x",
		"Query":     "ws://a.test/?x=1",
		"EmptyQ":    "ws://a.test?",
		"Fragment":  "ws://a.test#f",
		"UserInfo":  "ws://u@a.test",
		"OtherPort": "ws://a.test:3000",
		"NoScheme":  "a.test",
		"Empty":     "",
	}
	for name, relay := range rejectedRelays {
		t.Run("RejectsRelay"+name, func(t *testing.T) {
			t.Parallel()
			require.Error(t, VerifyNIP42(authEvent(t, relay), params))
		})
	}

	t.Run("SecureWantsWSS", func(t *testing.T) {
		t.Parallel()
		p := params
		p.Secure = true
		require.NoError(t, VerifyNIP42(authEvent(t, "wss://a.test"), p))
		require.Error(t, VerifyNIP42(authEvent(t, "ws://a.test"), p))
	})
	t.Run("LoopbackCollapses", func(t *testing.T) {
		t.Parallel()
		p := params
		p.TenantHost = "localhost:3000"
		require.NoError(t, VerifyNIP42(authEvent(t, "ws://127.0.0.1:3000"), p))
	})
	t.Run("RejectsOldAndFuture", func(t *testing.T) {
		t.Parallel()
		require.Error(t, VerifyNIP42(authEvent(t, "ws://a.test", eventtest.At(now.Unix()-61)), params))
		require.Error(t, VerifyNIP42(authEvent(t, "ws://a.test", eventtest.At(now.Unix()+61)), params))
		require.NoError(t, VerifyNIP42(authEvent(t, "ws://a.test", eventtest.At(now.Unix()-60)), params))
	})
	t.Run("RejectsChallenge", func(t *testing.T) {
		t.Parallel()
		other := sign(t, event.KindAuth, eventtest.Tag("relay", "ws://a.test"), eventtest.Tag("challenge", NewChallenge()))
		require.Error(t, VerifyNIP42(other, params))
		plusX := sign(t, event.KindAuth, eventtest.Tag("relay", "ws://a.test"), eventtest.Tag("challenge", challenge+"x"))
		require.Error(t, VerifyNIP42(plusX, params))
		none := sign(t, event.KindAuth, eventtest.Tag("relay", "ws://a.test"))
		require.Error(t, VerifyNIP42(none, params))
	})
	// A wrong challenge is refused before the signature is checked: a
	// replayed or made-up AUTH costs no Schnorr verification.
	t.Run("ChallengeBeforeSignature", func(t *testing.T) {
		t.Parallel()
		ev := sign(t, event.KindAuth, eventtest.Tag("relay", "ws://a.test"), eventtest.Tag("challenge", NewChallenge()))
		ev.Sig = ev.Sig[:127] + string("0123456789abcdef"[(int(ev.Sig[127])+1)%16])
		require.ErrorContains(t, VerifyNIP42(ev, params), "challenge tag does not match")
		ev = sign(t, event.KindAuth, eventtest.Tag("relay", "ws://b.test"), eventtest.Tag("challenge", challenge))
		ev.Content = "changed"
		require.ErrorContains(t, VerifyNIP42(ev, params), "relay tag")
	})
	t.Run("RejectsKind", func(t *testing.T) {
		t.Parallel()
		ev := sign(t, 1, eventtest.Tag("relay", "ws://a.test"), eventtest.Tag("challenge", challenge))
		require.Error(t, VerifyNIP42(ev, params))
	})
	t.Run("RejectsBadIDAndSignature", func(t *testing.T) {
		t.Parallel()
		ev := authEvent(t, "ws://a.test")
		ev.Content = "changed"
		require.Error(t, VerifyNIP42(ev, params))
		ev = authEvent(t, "ws://a.test")
		ev.Sig = ev.Sig[:127] + string("0123456789abcdef"[(int(ev.Sig[127])+1)%16])
		require.Error(t, VerifyNIP42(ev, params))
	})
}

// BenchmarkVerifyNIP42 prices a valid AUTH against one signed for another
// connection's challenge, the kind a flood of failed AUTHs sends.
func BenchmarkVerifyNIP42(b *testing.B) {
	key := eventtest.NewKey()
	challenge := NewChallenge()
	params := NIP42Params{Challenge: challenge, TenantHost: "a.test", Now: time.Now()}
	for name, c := range map[string]string{"Valid": challenge, "OtherChallenge": NewChallenge()} {
		ev := key.Signed(b, event.KindAuth, eventtest.Tag("relay", "ws://a.test"), eventtest.Tag("challenge", c))
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = VerifyNIP42(ev, params)
			}
		})
	}
}
