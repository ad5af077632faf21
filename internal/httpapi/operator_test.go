package httpapi_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/httpapi"
)

// docs/PROTOCOL.md §15.3 over a real HTTP connection against a real PostgreSQL: the
// operator-listener registration API.

const (
	opOrigin = "https://ops.example:8443"
	opPath   = "/operator/listener/pubkeys"
)

// opBundle is a door with one configured listener.
type opBundle struct {
	*testBundle
	listener eventtest.Key
}

func setupOperator(t *testing.T, change ...func(*httpapi.Config)) *opBundle {
	t.Helper()
	listener := eventtest.NewKey()
	b := setup(t, newDB(t), append([]func(*httpapi.Config){func(c *httpapi.Config) {
		c.Settings.OperatorAPIOrigin = opOrigin
		c.Settings.OperatorListeners = []config.OperatorListener{{Pubkey: listener.PubKey, URL: "https://listener.example/"}}
	}}, change...)...)
	b.cfg.Settings.RelayHost = b.ta.Host
	b.cfg.Listeners = b.st
	return &opBundle{testBundle: b.serve(t), listener: listener}
}

// call sends method with body, signed by key for the canonical URL (with a
// payload tag), with host as the Host header.
func (b *opBundle) call(t *testing.T, key eventtest.Key, method, host string, body []byte, opts ...eventtest.Option) response {
	t.Helper()
	return b.do(t, method, host, opPath, body, map[string]string{"Authorization": nip98(t, key, method, opOrigin+opPath, body, opts...)})
}

// registered returns the targets registered for listener, and their ages.
func (b *opBundle) registered(t *testing.T, listener string) map[string]time.Duration {
	t.Helper()
	pub, _ := hex.DecodeString(listener)
	rows, err := b.db.pool.Query(context.Background(),
		`SELECT encode(target_pubkey, 'hex'), now() - created_at FROM operator_listener_pubkeys WHERE listener_pubkey = $1`, pub)
	require.NoError(t, err)
	out := map[string]time.Duration{}
	for rows.Next() {
		var (
			target string
			age    time.Duration
		)
		require.NoError(t, rows.Scan(&target, &age))
		out[target] = age
	}
	require.NoError(t, rows.Err())
	return out
}

func targetsBody(ps ...string) []byte {
	return []byte(`{"pubkeys":["` + strings.Join(ps, `","`) + `"],"extra":true}`)
}

func TestOperatorRegistration(t *testing.T) {
	t.Parallel()
	b := setupOperator(t)
	x, y := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey

	t.Run("RegisterRenewRemove", func(t *testing.T) {
		res := b.call(t, b.listener, http.MethodPost, "anything.example", targetsBody(x, strings.ToUpper(y), x))
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, "{}", res.body)
		got := b.registered(t, b.listener.PubKey)
		require.Len(t, got, 2, "deduplicated, lowercased, on any Host")
		require.Contains(t, got, y)

		_, err := b.db.pool.Exec(context.Background(), `UPDATE operator_listener_pubkeys SET created_at = now() - interval '20 days'`)
		require.NoError(t, err)
		res = b.call(t, b.listener, http.MethodPost, b.ta.Host, targetsBody(x))
		require.Equal(t, http.StatusOK, res.status, res.body)
		got = b.registered(t, b.listener.PubKey)
		require.Less(t, got[x], time.Minute, "re-registering renews")
		require.Greater(t, got[y], 19*24*time.Hour, "the other one keeps its age")

		for range 2 { // idempotent
			res = b.call(t, b.listener, http.MethodDelete, b.ta.Host, targetsBody(x, y))
			require.Equal(t, http.StatusOK, res.status, res.body)
			require.Equal(t, "{}", res.body)
		}
		require.Empty(t, b.registered(t, b.listener.PubKey))
	})

	t.Run("Refusals", func(t *testing.T) {
		other := eventtest.NewKey()
		ok := targetsBody(x)
		cases := []struct {
			name   string
			res    func(t *testing.T) response
			status int
			msg    string
		}{
			{"NotAListener", func(t *testing.T) response { return b.call(t, other, http.MethodPost, b.ta.Host, ok) },
				http.StatusForbidden, "actor not authorized: not a configured operator listener"},
			{"NoPayloadTag", func(t *testing.T) response {
				return b.do(t, http.MethodPost, b.ta.Host, opPath, ok,
					map[string]string{"Authorization": nip98(t, b.listener, "POST", opOrigin+opPath, nil)})
			}, http.StatusUnauthorized, "NIP-98: missing payload tag"},
			{"HostDerivedURL", func(t *testing.T) response {
				return b.do(t, http.MethodPost, b.ta.Host, opPath, ok,
					map[string]string{"Authorization": nip98(t, b.listener, "POST", b.urlA(opPath), ok)})
			}, http.StatusUnauthorized, "NIP-98: URL mismatch: event has `" + b.urlA(opPath) + "`, expected `" + opOrigin + opPath + "`"},
			{"XPubkeyNeverAccepted", func(t *testing.T) response {
				lax := b.serve(t, func(c *httpapi.Config) { c.Settings.RequireAuthToken = false })
				return lax.do(t, http.MethodPost, b.ta.Host, opPath, ok, map[string]string{"X-Pubkey": b.listener.PubKey})
			}, http.StatusUnauthorized, "missing Nostr auth"},
			{"ReplayStoreDown", func(t *testing.T) response {
				down := &opBundle{testBundle: b.serve(t, func(c *httpapi.Config) { c.Replay = b.db.downStore(t) }), listener: b.listener}
				return down.call(t, b.listener, http.MethodPost, b.ta.Host, ok)
			}, http.StatusUnauthorized, "NIP-98: replay check unavailable"},
			{"MissingField", func(t *testing.T) response {
				return b.call(t, b.listener, http.MethodPost, b.ta.Host, []byte(`{"pub":1}`))
			},
				http.StatusBadRequest, "invalid operator-listener pubkeys JSON: missing field `pubkeys`"},
			{"BadJSON", func(t *testing.T) response {
				return b.call(t, b.listener, http.MethodPost, b.ta.Host, []byte(`{"pubkeys":`))
			},
				http.StatusBadRequest, "invalid operator-listener pubkeys JSON: unexpected end of JSON input"},
			{"NoPubkeys", func(t *testing.T) response {
				return b.call(t, b.listener, http.MethodPost, b.ta.Host, []byte(`{"pubkeys":[]}`))
			}, http.StatusBadRequest, "pubkeys must contain between 1 and 1000 entries"},
			{"TooMany", func(t *testing.T) response {
				ps := make([]string, 1001)
				for i := range ps {
					ps[i] = x
				}
				return b.call(t, b.listener, http.MethodDelete, b.ta.Host, targetsBody(ps...))
			}, http.StatusBadRequest, "pubkeys must contain between 1 and 1000 entries"},
			{"NotHex", func(t *testing.T) response {
				return b.call(t, b.listener, http.MethodPost, b.ta.Host, targetsBody(x[:63]))
			},
				http.StatusBadRequest, "pubkeys must contain 64-char hex public keys"},
			{"TooLarge", func(t *testing.T) response {
				return b.call(t, b.listener, http.MethodPost, b.ta.Host, []byte(`{"pubkeys":["`+strings.Repeat("a", 1<<20)+`"]}`))
			}, http.StatusRequestEntityTooLarge, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				res := c.res(t)
				require.Equal(t, c.status, res.status, res.body)
				if c.msg != "" {
					require.JSONEq(t, errorJSON(c.msg), res.body)
				}
			})
		}
		require.Empty(t, b.registered(t, other.PubKey))
	})

	t.Run("Replay", func(t *testing.T) {
		before := b.replayRows(t, b.ta.CommunityID)
		body := targetsBody(y)
		token := nip98(t, b.listener, "POST", opOrigin+opPath, body)
		res := b.do(t, http.MethodPost, "one.example", opPath, body, map[string]string{"Authorization": token})
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, before+1, b.replayRows(t, b.ta.CommunityID), "spent in the deployment community's namespace")
		res = b.do(t, http.MethodPost, "two.example", opPath, body, map[string]string{"Authorization": token})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.JSONEq(t, errorJSON("NIP-98: replay detected"), res.body)
	})
}

// Without RELAY_OPERATOR_API_ORIGIN (no listener configured) the route is
// a 500: nobody can sign against an origin that does not exist.
func TestOperatorRegistrationWithoutOrigin(t *testing.T) {
	t.Parallel()
	b := setup(t, newDB(t))
	res := b.do(t, http.MethodPost, b.ta.Host, opPath, targetsBody(eventtest.NewKey().PubKey), nil)
	require.Equal(t, http.StatusInternalServerError, res.status)
	require.JSONEq(t, errorJSON("internal server error"), res.body)
}
