package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// hsFrameLimit is the BUZZ_MAX_FRAME_BYTES of the hostile-client relay:
// small enough to keep oversized frames cheap, large enough for the
// 100,000-level JSON and the 10,000-tag event.
const hsFrameLimit = 262144

// hsDepth is the nesting depth of the deep-JSON cases.
const hsDepth = 100_000

const (
	hsParsePrefix = "invalid message: Invalid message format: "
	hsJSONError   = hsParsePrefix + "JSON parse error: "
	hsDrift       = "invalid: event timestamp too far from server time"
	hsBadSig      = "invalid: invalid schnorr signature"
)

// TestHostile sends one kind of hostile input per subtest over a real
// WebSocket or the HTTP bridge, and checks the documented prefixed answer,
// that the socket stays usable (or is closed with the documented code), and
// that nothing was stored. A fresh client then publishes and reads back.
func TestHostile(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_MAX_FRAME_BYTES": strconv.Itoa(hsFrameLimit)})

	led := &hsLedger{r: r, want: map[string][]string{}}

	// Cases is not parallel itself, so the health check below runs after
	// every case has finished.
	t.Run("Cases", func(t *testing.T) {
		t.Run("FrameAtLimitAccepted", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			ev, frame := hsEventFrameOfSize(t, k, hsFrameLimit)
			require.Len(t, frame, hsFrameLimit)
			w.Send(frame)
			require.Equal(t, []any{"OK", ev.ID, true, ""}, w.Next())
			led.requireStored(t, k, ev.ID)
		})

		t.Run("FrameOverLimitKeepsSocket", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			ev, frame := hsEventFrameOfSize(t, k, hsFrameLimit+1)
			w.Send(frame)
			msg := fmt.Sprintf("error: frame too large (%d bytes, limit %d)", hsFrameLimit+1, hsFrameLimit)
			require.Equal(t, []any{"NOTICE", msg}, w.Next())
			require.Equal(t, []any{"OK", ev.ID, false, msg}, w.Next())
			probe := hsUsable(t, w, k, ev.ID)
			led.requireStored(t, k, probe)
		})

		t.Run("FrameOverTwiceLimitCloses1009", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			_, frame := hsEventFrameOfSize(t, k, 3*hsFrameLimit)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = w.C.Write(ctx, websocket.MessageText, frame) // the relay may stop reading before the end
			msg := fmt.Sprintf("error: frame too large (%d bytes, limit %d)", 2*hsFrameLimit+1, hsFrameLimit)
			require.Equal(t, []any{"NOTICE", msg}, w.Next())
			_, err := w.NextErr(5 * time.Second)
			require.Error(t, err)
			require.Equal(t, websocket.StatusMessageTooBig, websocket.CloseStatus(err), "%v", err)
			led.requireStored(t, k)
			hsFresh(t, r)
		})

		t.Run("InvalidUTF8Frame", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			for _, frame := range [][]byte{
				[]byte("\xff\xfe\xfd"),
				[]byte(`["REQ",` + "\xc3\x28" + `,{}]`),
			} {
				w.Send(frame)
				msg := w.Next()
				require.Equal(t, "NOTICE", msg[0], "%q", frame)
				require.True(t, strings.HasPrefix(msg[1].(string), hsJSONError), "%q: %v", frame, msg)
				hsUsable(t, w, k)
			}
		})

		t.Run("InvalidUTF8ContentIDOverRawBytes", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			// The id and signature commit to the raw byte 0xff; the relay
			// decodes it as U+FFFD, so the id it computes differs.
			ev := event.Event{PubKey: k.PubKey, CreatedAt: time.Now().Unix(), Kind: 1, Tags: event.Tags{},
				Content: "bad \ufffd byte"}
			raw := fmt.Sprintf(`[0,"%s",%d,1,[],"bad %s byte"]`, k.PubKey, ev.CreatedAt, "\xff")
			sum := sha256.Sum256([]byte(raw))
			ev.ID = hex.EncodeToString(sum[:])
			ev.Sig = hsSchnorr(t, k, sum[:])
			w.Send(hsRawContentFrame(ev))
			require.Equal(t, []any{"OK", ev.ID, false,
				"invalid: invalid event id: computed " + ev.ComputeID() + ", got " + ev.ID}, w.Next())
			probe := hsUsable(t, w, k, ev.ID)
			led.requireStored(t, k, probe)
		})

		t.Run("DeepJSONMessage", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			var probes []string
			for name, frame := range map[string][]byte{
				"unbalanced": bytes.Repeat([]byte("["), hsDepth),
				"balanced":   hsDeep(),
				"inFilter":   slices.Concat([]byte(`["REQ","deep",{"kinds":`), hsDeep(), []byte(`}]`)),
				"inEventTags": slices.Concat([]byte(`["EVENT",{"id":"`+strings.Repeat("a", 64)+`","pubkey":"`+k.PubKey+
					`","created_at":1,"kind":1,"content":"deep","sig":"`+strings.Repeat("b", 128)+`","tags":`), hsDeep(), []byte(`}]`)),
			} {
				require.Less(t, len(frame), hsFrameLimit, name)
				w.Send(frame)
				msg := w.Next()
				require.Equal(t, "NOTICE", msg[0], name)
				require.True(t, strings.HasPrefix(msg[1].(string), hsJSONError), "%s: %v", name, msg)
				probes = append(probes, hsUsable(t, w, k))
			}
			led.requireStored(t, k, probes...)
		})

		t.Run("TenThousandTags", func(t *testing.T) {
			t.Parallel()
			// No tag-count limit is documented (docs/PROTOCOL.md §7.11): the event is stored whole.
			w, k := hsAuthed(t, r)
			opts := make([]eventtest.Option, 0, 10_000)
			for i := range 10_000 {
				opts = append(opts, eventtest.Tag("x", "v"+strconv.Itoa(i)))
			}
			ev := k.Signed(t, 1, append(opts, eventtest.Content("ten thousand tags"))...)
			require.Less(t, len(hsFrame(ev)), hsFrameLimit)
			w.MustPublish(ev)
			evs, closed, eose := w.Req("tags", map[string]any{"ids": []string{ev.ID}})
			require.True(t, eose, closed)
			require.Equal(t, []event.Event{ev}, evs)
			require.Len(t, evs[0].Tags, 10_000)
			led.requireStored(t, k, ev.ID)
		})

		t.Run("IDMismatch", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			ev := k.Signed(t, 1, eventtest.Content("signed content"))
			ev.Content = "changed content"
			ok, msg := w.Publish(ev)
			require.False(t, ok)
			require.Equal(t, "invalid: invalid event id: computed "+ev.ComputeID()+", got "+ev.ID, msg)
			probe := hsUsable(t, w, k, ev.ID)
			led.requireStored(t, k, probe)
		})

		t.Run("WrongSignature", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			ev := k.Signed(t, 1, eventtest.Content("one"))
			other := k.Signed(t, 1, eventtest.Content("two"))
			stolen := ev
			stolen.Sig = other.Sig // a valid signature, of another id
			flipped := ev
			flipped.Sig = hsFlipHex(ev.Sig)
			foreign := ev
			foreign.Sig = eventtest.NewKey().Signed(t, 1, eventtest.Content("one")).Sig
			for _, bad := range []event.Event{stolen, flipped, foreign} {
				_, ok := bad.CheckID()
				require.True(t, ok)
				ok, msg := w.Publish(bad)
				require.False(t, ok)
				require.Equal(t, hsBadSig, msg)
			}
			probe := hsUsable(t, w, k, ev.ID)
			led.requireStored(t, k, probe)
		})

		t.Run("CreatedAtWindow", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			now := time.Now().Unix()
			var accepted []string
			for _, tc := range []struct {
				at int64
				ok bool
			}{
				{now + 905, false},
				{now - 905, false},
				{now + 86400*365*100, false},
				{0, false},
				{math.MaxInt64, false},
				{now + 600, true},
				{now - 600, true},
			} {
				ev := k.Signed(t, 1, eventtest.Content("at "+strconv.FormatInt(tc.at, 10)), eventtest.At(tc.at))
				ok, msg := w.Publish(ev)
				if tc.ok {
					require.True(t, ok, "%d: %s", tc.at, msg)
					require.Empty(t, msg)
					accepted = append(accepted, ev.ID)
					continue
				}
				require.False(t, ok, tc.at)
				require.Equal(t, hsDrift, msg, tc.at)
			}
			accepted = append(accepted, hsUsable(t, w, k))
			led.requireStored(t, k, accepted...)
		})

		t.Run("BinaryFrames", func(t *testing.T) {
			t.Parallel()
			w, k := hsAuthed(t, r)
			send := func(b []byte) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				require.NoError(t, w.C.Write(ctx, websocket.MessageBinary, b))
			}
			// Valid UTF-8: handled as text.
			ev := k.Signed(t, 1, eventtest.Content("sent in a binary frame"))
			send(hsFrame(ev))
			require.Equal(t, []any{"OK", ev.ID, true, ""}, w.Next())
			send([]byte(`["REQ","bin",{"ids":["` + ev.ID + `"]}]`))
			got := w.Next()
			require.Equal(t, []any{"EVENT", "bin"}, got[:2])
			require.Equal(t, ev.ID, got[2].(map[string]any)["id"])
			require.Equal(t, []any{"EOSE", "bin"}, w.Next())
			send([]byte("not json"))
			msg := w.Next()
			require.Equal(t, "NOTICE", msg[0])
			require.True(t, strings.HasPrefix(msg[1].(string), hsJSONError), "%v", msg)
			// Invalid UTF-8: ignored without an answer, even an EVENT.
			bad := k.Signed(t, 1, eventtest.Content("bad \ufffd byte"))
			send(hsRawContentFrame(bad))
			send([]byte("\xff\xfe"))
			evs, closed, eose := w.Req("after", map[string]any{"ids": []string{bad.ID}})
			require.True(t, eose, closed)
			require.Empty(t, evs)
			probe := hsUsable(t, w, k, bad.ID)
			led.requireStored(t, k, ev.ID, probe)
		})

		t.Run("HTTPEvents", func(t *testing.T) {
			t.Parallel()
			k := eventtest.NewKey()
			post := func(body []byte) (int, string) {
				status, resp := r.HTTP(t, "", http.MethodPost, "/events", &k, body)
				return status, string(resp)
			}
			// POST /events takes at most twice BUZZ_MAX_EVENT_BYTES, which
			// follows the frame limit here (docs/OPERATIONS.md "Byte budgets").
			status, body := post(bytes.Repeat([]byte("a"), 2*hsFrameLimit+1))
			require.Equal(t, http.StatusRequestEntityTooLarge, status)
			require.JSONEq(t, `{"error":"invalid: event too large (524289 bytes, maximum 262144)"}`, body)

			for name, garbage := range map[string][]byte{
				"truncated": []byte(`{"id":`),
				"notJSON":   []byte("\xff\xfe"),
				"deep":      hsDeep(),
				"deepTags":  slices.Concat([]byte(`{"tags":`), hsDeep(), []byte(`}`)),
			} {
				status, body := post(garbage)
				require.Equal(t, http.StatusBadRequest, status, name)
				require.True(t, strings.HasPrefix(hsErrorField(t, body), "invalid event JSON: "), "%s: %s", name, body)
			}

			ev := k.Signed(t, 1, eventtest.Content("signed over http"))
			changed := ev
			changed.Content = "changed over http"
			status, body = r.PostEvent(t, "", k, changed)
			require.Equal(t, http.StatusBadRequest, status)
			require.Equal(t, "invalid: invalid event id: computed "+changed.ComputeID()+", got "+changed.ID, hsErrorField(t, body))
			badSig := ev
			badSig.Sig = hsFlipHex(ev.Sig)
			status, body = r.PostEvent(t, "", k, badSig)
			require.Equal(t, http.StatusBadRequest, status)
			require.Equal(t, hsBadSig, hsErrorField(t, body))
			old := k.Signed(t, 1, eventtest.At(time.Now().Unix()-905))
			status, body = r.PostEvent(t, "", k, old)
			require.Equal(t, http.StatusBadRequest, status)
			require.Equal(t, hsDrift, hsErrorField(t, body))
			led.requireStored(t, k)

			status, body = r.PostEvent(t, "", k, ev)
			require.Equal(t, http.StatusOK, status, body)
			require.JSONEq(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":""}`, body)
			led.requireStored(t, k, ev.ID)
		})

		t.Run("HTTPQuery", func(t *testing.T) {
			t.Parallel()
			k := eventtest.NewKey()
			query := func(body []byte) (int, string) {
				status, resp := r.HTTP(t, "", http.MethodPost, "/query", &k, body)
				return status, string(resp)
			}
			status, body := query(slices.Concat([]byte(`[{"kinds":[1],"search":"`), bytes.Repeat([]byte("a"), 1<<20), []byte(`"}]`)))
			require.Equal(t, http.StatusRequestEntityTooLarge, status)
			require.JSONEq(t, `{"error":"request body too large"}`, body)
			for name, garbage := range map[string][]byte{
				"truncated": []byte(`[{"kinds":`),
				"notJSON":   []byte("\xff\xfe"),
				"deep":      hsDeep(),
				"inFilter":  slices.Concat([]byte(`[{"kinds":`), hsDeep(), []byte(`}]`)),
			} {
				status, body := query(garbage)
				require.Equal(t, http.StatusBadRequest, status, name)
				require.JSONEq(t, `{"error":"invalid filters: body must be a JSON array of filters"}`, body, name)
			}
			status, body = query([]byte(`[{"kinds":[1],"ids":["nothex"]}]`))
			require.Equal(t, http.StatusBadRequest, status)
			require.True(t, strings.HasPrefix(hsErrorField(t, body), "invalid filters: "), body)
			ev := k.Signed(t, 1, eventtest.Content("found by query"))
			status, body = r.PostEvent(t, "", k, ev)
			require.Equal(t, http.StatusOK, status, body)
			status, body = query([]byte(`[{"ids":["` + ev.ID + `"]}]`))
			require.Equal(t, http.StatusOK, status, body)
			var got []event.Event
			require.NoError(t, json.Unmarshal([]byte(body), &got))
			require.Equal(t, []event.Event{ev}, got)
			led.requireStored(t, k, ev.ID)
		})
	})

	// Every socket of the cases is closed; once the relay has torn them
	// down, no refused frame can still be in flight: check again.
	led.recheck(t)
	// The relay is healthy: a fresh client publishes and reads back.
	hsFresh(t, r)
}

// TestHostileHalfClosed speaks raw TCP: a client that closes its write side
// right after an EVENT, and one that disconnects in the middle of a frame.
// Its own relay lets it wait until every connection is torn down (the
// connection gauge is back to zero) before it looks at the database.
func TestHostileHalfClosed(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)

	// The cases run one after another: each waits for the gauge to reach zero.
	t.Run("EventThenCloseWrite", func(t *testing.T) {
		c := hsRawDial(t, r)
		k := eventtest.NewKey()
		c.auth(t, k)
		ev := k.Signed(t, 1, eventtest.Content("sent before a half close"))
		c.write(t, 0x1, hsFrame(ev), -1)
		require.NoError(t, c.conn.CloseWrite())
		// Whatever the relay answers, it ends the connection.
		for {
			op, _, err := c.read()
			if err != nil || op == 0x8 {
				break
			}
		}
		hsWaitIdle(t, r)
		stored := hsStored(t, r, k.PubKey)
		if len(stored) > 0 { // stored whole or not at all
			require.Equal(t, []string{ev.ID}, stored)
			w := r.Dial(t, "")
			w.Auth(k)
			evs, closed, eose := w.Req("half", map[string]any{"ids": []string{ev.ID}})
			require.True(t, eose, closed)
			require.Equal(t, []event.Event{ev}, evs)
		}
		hsFresh(t, r)
	})

	t.Run("DisconnectMidFrame", func(t *testing.T) {
		c := hsRawDial(t, r)
		k := eventtest.NewKey()
		c.auth(t, k)
		ev := k.Signed(t, 1, eventtest.Content("cut in the middle "+strings.Repeat("x", 1000)))
		frame := hsFrame(ev)
		c.write(t, 0x1, frame[:len(frame)/2], len(frame))
		require.NoError(t, c.conn.Close())
		hsWaitIdle(t, r)
		require.Empty(t, hsStored(t, r, k.PubKey))
		hsFresh(t, r)
	})

	t.Run("HalfFrameThenCloseWrite", func(t *testing.T) {
		c := hsRawDial(t, r)
		k := eventtest.NewKey()
		c.auth(t, k)
		ev := k.Signed(t, 1, eventtest.Content("half a frame"))
		frame := hsFrame(ev)
		c.write(t, 0x1, frame[:len(frame)-10], len(frame))
		require.NoError(t, c.conn.CloseWrite())
		// The relay answers nothing but the end of the connection.
		for {
			op, payload, err := c.read()
			if err != nil {
				break
			}
			require.Equal(t, byte(0x8), op, "%q", payload)
		}
		hsWaitIdle(t, r)
		require.Empty(t, hsStored(t, r, k.PubKey))
		hsFresh(t, r)
	})
}

// hsAuthed dials the deployment host as a fresh key and authenticates.
func hsAuthed(t *testing.T, r *relaytest.Relay) (*relaytest.WS, eventtest.Key) {
	t.Helper()
	k := eventtest.NewKey()
	w := r.Dial(t, "")
	w.Auth(k)
	return w, k
}

// hsUsable shows the socket still answers normally: a REQ for the hostile
// ids ends in EOSE with none of them, and a valid event gets OK true. It
// returns the valid event's id.
func hsUsable(t *testing.T, w *relaytest.WS, k eventtest.Key, ids ...string) string {
	t.Helper()
	if len(ids) == 0 {
		ids = []string{strings.Repeat("0", 64)}
	}
	evs, closed, eose := w.Req("usable", map[string]any{"ids": ids})
	require.True(t, eose, closed)
	require.Empty(t, evs)
	probe := k.Signed(t, 1, eventtest.Content("probe "+rand.Text()))
	w.MustPublish(probe)
	return probe.ID
}

// hsFresh publishes and reads back an event on a new connection.
func hsFresh(t *testing.T, r *relaytest.Relay) {
	t.Helper()
	w, k := hsAuthed(t, r)
	ev := k.Signed(t, 1, eventtest.Content("healthy"))
	w.MustPublish(ev)
	evs, closed, eose := w.Req("fresh", map[string]any{"ids": []string{ev.ID}})
	require.True(t, eose, closed)
	require.Equal(t, []event.Event{ev}, evs)
}

// hsStored returns the sorted ids of every stored event by pubkey.
func hsStored(t *testing.T, r *relaytest.Relay, pubkey string) []string {
	t.Helper()
	rows, err := r.App.Pool().Query(context.Background(),
		`SELECT encode(id, 'hex') FROM events WHERE pubkey = decode($1, 'hex') ORDER BY 1`, pubkey)
	require.NoError(t, err)
	ids := []string{}
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

// hsLedger remembers what each case expects stored for its key, so the
// expectations can be checked again once every connection is torn down and
// no refused frame can still be in flight.
type hsLedger struct {
	r    *relaytest.Relay
	mu   sync.Mutex
	want map[string][]string // pubkey → sorted ids
}

// requireStored requires exactly ids stored by k, now and at recheck.
func (l *hsLedger) requireStored(t *testing.T, k eventtest.Key, ids ...string) {
	t.Helper()
	want := append([]string{}, ids...)
	slices.Sort(want)
	require.Equal(t, want, hsStored(t, l.r, k.PubKey))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.want[k.PubKey] = want
}

// recheck waits until no WebSocket is open, then checks every expectation again.
func (l *hsLedger) recheck(t *testing.T) {
	t.Helper()
	hsWaitIdle(t, l.r)
	l.mu.Lock()
	defer l.mu.Unlock()
	for pubkey, want := range l.want {
		require.Equal(t, want, hsStored(t, l.r, pubkey), "events of %s", pubkey)
	}
}

// hsWaitIdle waits until the relay has torn every WebSocket down: the gauge
// drops only after the connection's handlers have finished.
func hsWaitIdle(t *testing.T, r *relaytest.Relay) {
	t.Helper()
	require.Eventually(t, func() bool { return r.Metric(t, "buzz_ws_connections_active") == 0 },
		10*time.Second, 10*time.Millisecond)
}

// hsFrame is ["EVENT",ev].
func hsFrame(ev event.Event) []byte {
	return append(ev.AppendJSON([]byte(`["EVENT",`)), ']')
}

// hsRawContentFrame is hsFrame with every U+FFFD of the encoding replaced
// by the invalid byte 0xff.
func hsRawContentFrame(ev event.Event) []byte {
	return bytes.ReplaceAll(hsFrame(ev), []byte("\ufffd"), []byte("\xff"))
}

// hsEventFrameOfSize signs a kind 1 event of k whose EVENT frame is exactly
// size bytes.
func hsEventFrameOfSize(t *testing.T, k eventtest.Key, size int) (event.Event, []byte) {
	t.Helper()
	base := len(hsFrame(k.Signed(t, 1, eventtest.Content(""))))
	ev := k.Signed(t, 1, eventtest.Content(strings.Repeat("a", size-base)))
	return ev, hsFrame(ev)
}

// hsDeep is hsDepth nested, balanced JSON arrays.
func hsDeep() []byte {
	return slices.Concat(bytes.Repeat([]byte("["), hsDepth), bytes.Repeat([]byte("]"), hsDepth))
}

// hsSchnorr signs a 32-byte message with k.
func hsSchnorr(t *testing.T, k eventtest.Key, msg []byte) string {
	t.Helper()
	priv, _ := btcec.PrivKeyFromBytes(k.SK)
	sig, err := schnorr.Sign(priv, msg)
	require.NoError(t, err)
	return hex.EncodeToString(sig.Serialize())
}

// hsFlipHex changes the last hex digit of s.
func hsFlipHex(s string) string {
	last := byte('0')
	if s[len(s)-1] == '0' {
		last = '1'
	}
	return s[:len(s)-1] + string(last)
}

// hsErrorField returns the "error" of a bridge error body.
func hsErrorField(t *testing.T, body string) string {
	t.Helper()
	var b struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &b), body)
	return b.Error
}

// hsRaw is a WebSocket client written by hand over TCP, so a test can
// half-close the socket or stop in the middle of a frame.
type hsRaw struct {
	conn      *net.TCPConn
	br        *bufio.Reader
	host      string
	challenge string
}

// hsRawDial upgrades a TCP connection to the deployment host and reads
// the AUTH challenge.
func hsRawDial(t *testing.T, r *relaytest.Relay) *hsRaw {
	t.Helper()
	nc, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	conn := nc.(*net.TCPConn)
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	var key [16]byte
	_, _ = rand.Read(key[:])
	_, err = fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", r.Host, base64.StdEncoding.EncodeToString(key[:]))
	require.NoError(t, err)
	c := &hsRaw{conn: conn, br: bufio.NewReader(conn), host: r.Host}
	resp, err := http.ReadResponse(c.br, nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	msg := c.next(t)
	require.Equal(t, "AUTH", msg[0])
	c.challenge = msg[1].(string)
	return c
}

// auth authenticates as k and expects OK true.
func (c *hsRaw) auth(t *testing.T, k eventtest.Key) {
	t.Helper()
	ev := k.Signed(t, event.KindAuth, eventtest.Content(""),
		eventtest.Tag("challenge", c.challenge), eventtest.Tag("relay", "ws://"+c.host))
	b, err := json.Marshal([]any{"AUTH", ev})
	require.NoError(t, err)
	c.write(t, 0x1, b, -1)
	require.Equal(t, []any{"OK", ev.ID, true, ""}, c.next(t))
}

// write sends one final, masked frame of opcode op carrying payload whose
// header announces announced bytes (-1: len(payload)).
func (c *hsRaw) write(t *testing.T, op byte, payload []byte, announced int) {
	t.Helper()
	if announced < 0 {
		announced = len(payload)
	}
	b := []byte{0x80 | op}
	switch {
	case announced < 126:
		b = append(b, 0x80|byte(announced))
	case announced <= math.MaxUint16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(announced))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(announced))
	}
	mask := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, mask[:]...)
	for i, x := range payload {
		b = append(b, x^mask[i%4])
	}
	_, err := c.conn.Write(b)
	require.NoError(t, err)
}

// read reads one server frame (unmasked, unfragmented).
func (c *hsRaw) read() (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(c.br, l[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(c.br, l[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(l[:])
	}
	if n > 1<<20 {
		return 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, payload, nil
}

// next reads one text frame as a JSON array.
func (c *hsRaw) next(t *testing.T) []any {
	t.Helper()
	op, b, err := c.read()
	require.NoError(t, err)
	require.Equal(t, byte(0x1), op, "%q", b)
	var msg []any
	require.NoError(t, json.Unmarshal(b, &msg), "%q", b)
	return msg
}
