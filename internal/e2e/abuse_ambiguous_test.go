package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// TestAbuseAmbiguousCommit is a write whose COMMIT lands while the relay
// loses the answer: the relay's database connections go through a real TCP
// proxy that, once armed with an event id, forwards the write and cuts the
// connection just before the server's ReadyForQuery, after the commit. The
// publisher is answered error: and its retry duplicate:, so without more
// the event would never reach a live subscriber.
func TestAbuseAmbiguousCommit(t *testing.T) {
	t.Parallel()

	t.Run("StoredIsFannedOut", func(t *testing.T) {
		t.Parallel()
		px, e, author, ch, wa, wr := ambSetup(t, nil)
		msg := chMsg(t, author, ch, "committed, answer lost")
		px.arm(msg.ID, false)
		ok, reason := wa.Publish(msg)
		require.False(t, ok)
		require.True(t, strings.HasPrefix(reason, "error:"), reason)
		require.True(t, px.fired(), "the proxy cut the write")
		require.True(t, eventRow(t, e.r, e.cid, msg.ID).live, "the write committed")
		// The community's hot window (made by the live REQ) was dropped as
		// the commit went unsettled: a REQ meanwhile reads PostgreSQL, which
		// holds the event (docs/ARCHITECTURE.md "Hot window").
		require.Equal(t, 1.0, e.r.Metric(t, `buzz_hot_window_resets_total{reason="ambiguous"}`))

		got := ambNextEvent(t, wr, "live")
		require.Equal(t, msg.ID, got.ID, "the stored event reaches the live subscriber")
		ok, reason = wa.Publish(msg)
		require.True(t, ok)
		require.Equal(t, wire.MsgDuplicate, reason)
	})

	t.Run("UnknownInterruptsLive", func(t *testing.T) {
		t.Parallel()
		px, _, author, ch, wa, wr := ambSetup(t, map[string]string{"TEST_AMBIGUOUS_COMMIT_TIMEOUT": "1s"})
		msg := chMsg(t, author, ch, "committed, then the database went away")
		px.arm(msg.ID, true) // after the cut, every connection fails
		ok, reason := wa.Publish(msg)
		require.False(t, ok)
		require.True(t, strings.HasPrefix(reason, "error:"), reason)

		f, err := wr.NextErr(10 * time.Second)
		require.NoError(t, err)
		require.Equal(t, []any{"CLOSED", "live", wire.MsgLiveInterrupted}, f)

		px.heal()
		evs, closed, eose := wr.Req("again", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
		require.True(t, eose, closed)
		require.Equal(t, []string{msg.ID}, ids(evs), "the resubscribed client reads what it missed")
	})
}

// ambSetup is a relay behind the proxy, a channel of author's, author's
// socket and a reader's socket holding a live subscription "live" on it.
func ambSetup(t *testing.T, env map[string]string) (*ambProxy, *chEnv, eventtest.Key, string, *relaytest.WS, *relaytest.WS) {
	t.Helper()
	px, r := ambRelay(t, env)
	e := &chEnv{r: r, cid: communityID(t, r, r.Host), relayPub: event.PubKey(r.App.RelayKey())}
	author, reader := eventtest.NewKey(), eventtest.NewKey()
	wa := e.dial(t, author)
	ch := chCreate(t, wa, author)
	wr := e.dial(t, reader)
	_, closed, eose := wr.Req("live", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
	require.True(t, eose, closed)
	return px, e, author, ch, wa, wr
}

// ambRelay starts a relay whose database connections pass through a proxy.
func ambRelay(t *testing.T, env map[string]string) (*ambProxy, *relaytest.Relay) {
	t.Helper()
	_, dbURL := dbtest.NewDB(t)
	px := newAmbProxy(t, dbURL)
	vars := map[string]string{"DATABASE_URL": px.url}
	for k, v := range env {
		vars[k] = v
	}
	return px, relaytest.Start(t, vars)
}

// ambProxy is a TCP proxy in front of PostgreSQL that can lose the answer
// of one write: armed with an event id, it watches each connection's
// client bytes for the id (hex or raw) and, once seen, drops the server's
// next ReadyForQuery and closes that client connection. With down set it
// then refuses every connection until heal.
type ambProxy struct {
	t      *testing.T
	ln     net.Listener
	url    string
	target func() (net.Conn, error)

	mu       sync.Mutex
	id       string
	down     bool // after the cut
	downNext bool
	cut      bool
	conns    map[net.Conn]struct{}
}

func newAmbProxy(t *testing.T, dbURL string) *ambProxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dbURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	host, port := cfg.Host, cfg.Port
	px := &ambProxy{t: t, ln: ln, conns: map[net.Conn]struct{}{}}
	px.target = func() (net.Conn, error) {
		if strings.HasPrefix(host, "/") {
			return net.Dial("unix", fmt.Sprintf("%s/.s.PGSQL.%d", host, port))
		}
		return net.Dial("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
	}
	u := url.URL{Scheme: "postgres", Host: ln.Addr().String(), Path: "/" + cfg.Database,
		RawQuery: "sslmode=disable"}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	} else {
		u.User = url.User(cfg.User)
	}
	px.url = u.String()
	go px.serve()
	t.Cleanup(func() {
		ln.Close()
		px.mu.Lock()
		for c := range px.conns {
			c.Close()
		}
		px.mu.Unlock()
	})
	return px
}

// arm makes the proxy lose the answer of the write that carries id; with
// down, the database then stays unreachable until heal.
func (px *ambProxy) arm(id string, down bool) {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.id, px.downNext, px.cut = id, down, false
}

func (px *ambProxy) fired() bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.cut
}

func (px *ambProxy) heal() {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.down = false
}

func (px *ambProxy) track(c net.Conn) bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.down {
		return false
	}
	px.conns[c] = struct{}{}
	return true
}

func (px *ambProxy) serve() {
	for {
		c, err := px.ln.Accept()
		if err != nil {
			return
		}
		go px.pipe(c)
	}
}

func (px *ambProxy) pipe(client net.Conn) {
	if !px.track(client) {
		client.Close()
		return
	}
	server, err := px.target()
	if err != nil {
		client.Close()
		return
	}
	px.mu.Lock()
	px.conns[server] = struct{}{}
	px.mu.Unlock()
	var armed sync.Mutex
	seen := false
	go func() { // client → server, watching for the armed id
		var tail []byte
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				chunk := append(tail, buf[:n]...)
				px.mu.Lock()
				id := px.id
				px.mu.Unlock()
				if id != "" && ambContains(chunk, id) {
					armed.Lock()
					seen = true
					armed.Unlock()
				}
				tail = append([]byte(nil), chunk[max(0, len(chunk)-64):]...)
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				server.Close()
				return
			}
		}
	}()
	// server → client, message by message: a type byte and a length.
	defer client.Close()
	defer server.Close()
	head := make([]byte, 5)
	for {
		if _, err := io.ReadFull(server, head); err != nil {
			return
		}
		body := make([]byte, int(binary.BigEndian.Uint32(head[1:]))-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		armed.Lock()
		cut := seen && head[0] == 'Z'
		armed.Unlock()
		if cut {
			px.mu.Lock()
			px.id, px.cut = "", true
			if px.downNext {
				px.down = true
				for c := range px.conns {
					c.Close()
				}
			}
			px.mu.Unlock()
			return
		}
		if _, err := client.Write(append(head, body...)); err != nil {
			return
		}
	}
}

// ambContains reports whether b holds the event id as hex text or raw bytes.
func ambContains(b []byte, id string) bool {
	if bytes.Contains(b, []byte(id)) {
		return true
	}
	raw, err := hex.DecodeString(id)
	return err == nil && bytes.Contains(b, raw)
}

// ambNextEvent reads frames until an EVENT of sub arrives.
func ambNextEvent(t *testing.T, w *relaytest.WS, sub string) event.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f, err := w.NextErr(time.Until(deadline))
		require.NoError(t, err, "no live event for %s", sub)
		if len(f) == 3 && f[0] == "EVENT" && f[1] == sub {
			return chFrameEvent(t, f)
		}
	}
	require.FailNow(t, "no live event", sub)
	return event.Event{}
}
