package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/wire"
)

// fakeRelay speaks enough of spec 10 §7 to exercise the client: it answers
// AUTH, EVENT (content "refuse" is refused), REQ (kind 666 is CLOSED, others
// get the stored events then EOSE and then every later EVENT live), COUNT and CLOSE.
type fakeRelay struct {
	mu     sync.Mutex
	stored []event.Event
}

func (f *fakeRelay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	var wmu sync.Mutex
	send := func(b []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = ws.Write(ctx, websocket.MessageText, b)
	}
	buf := make([]byte, 32)
	_, _ = rand.Read(buf)
	challenge := hex.EncodeToString(buf)
	send(wire.AuthChallenge(challenge))
	authed := false
	live := map[string]bool{}
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		m, err := wire.ParseClient(b)
		if err != nil {
			var pe *wire.ParseError // ParseClient fails with nothing else
			if errors.As(err, &pe) {
				send(wire.Notice(pe.Notice()))
			}
			continue
		}
		switch m.Type {
		case wire.TypeAuth:
			ok := m.Event.Tags.HasValue("challenge", challenge) && m.Event.VerifySignature()
			authed = ok
			msg := ""
			if !ok {
				msg = wire.MsgVerification
			}
			send(wire.OK(m.Event.ID, ok, msg))
		case wire.TypeEvent:
			if !authed {
				send(wire.OK(m.Event.ID, false, wire.MsgNotAuthenticated))
				continue
			}
			if m.Event.Content == "refuse" {
				send(wire.OK(m.Event.ID, false, "invalid: refused"))
				continue
			}
			f.mu.Lock()
			f.stored = append(f.stored, m.Event)
			f.mu.Unlock()
			send(wire.OK(m.Event.ID, true, ""))
			for sub := range live {
				send(wire.EventFrame(sub, m.Event.AppendJSON(nil)))
			}
		case wire.TypeReq:
			if len(m.Filters) > 0 && m.Filters[0].CanMatchKind(666) && m.Filters[0].HasKinds() {
				send(wire.Closed(m.SubID, "restricted: nope"))
				continue
			}
			f.mu.Lock()
			for _, ev := range f.stored {
				send(wire.EventFrame(m.SubID, ev.AppendJSON(nil)))
			}
			f.mu.Unlock()
			send(wire.EOSE(m.SubID))
			live[m.SubID] = true
		case wire.TypeCount:
			f.mu.Lock()
			n := int64(len(f.stored))
			f.mu.Unlock()
			send(wire.Count(m.SubID, n))
		case wire.TypeClose:
			delete(live, m.SubID)
			send(wire.Closed(m.SubID, ""))
		}
	}
}

type testBundle struct {
	url string
	sk  []byte
}

func setup(t *testing.T) (*Conn, *testBundle) {
	t.Helper()
	srv := httptest.NewServer(&fakeRelay{})
	t.Cleanup(srv.Close)
	b := &testBundle{url: "ws" + strings.TrimPrefix(srv.URL, "http"), sk: event.GenerateKey()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.url, b.sk)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, b
}

func signed(t *testing.T, sk []byte, content string) event.Event {
	t.Helper()
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: content}
	require.NoError(t, ev.Sign(sk))
	return ev
}

func TestConn(t *testing.T) {
	t.Parallel()

	t.Run("PublishConcurrent", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t)
		ctx := t.Context()
		evs := make([]event.Event, 32)
		for i := range evs {
			evs[i] = signed(t, b.sk, "hello "+strconv.Itoa(i))
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(evs))
		for _, ev := range evs {
			wg.Go(func() {
				ok, msg, err := c.Publish(ctx, ev)
				if err == nil && !ok {
					err = errors.New(msg)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		n, err := c.Count(ctx, event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.EqualValues(t, 32, n)
	})

	t.Run("PublishRefused", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t)
		ok, msg, err := c.Publish(t.Context(), signed(t, b.sk, "refuse"))
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, "invalid: refused", msg)
	})

	t.Run("QueryUntilEOSE", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t)
		ev := signed(t, b.sk, "stored")
		_, _, err := c.Publish(t.Context(), ev)
		require.NoError(t, err)
		got, err := c.Query(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, ev.ID, got[0].ID)
	})

	t.Run("QueryClosed", func(t *testing.T) {
		t.Parallel()
		c, _ := setup(t)
		_, err := c.Query(t.Context(), event.Filter{Kinds: []int{666}})
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, "restricted: nope", refused.Message)
	})

	t.Run("SubscribeLive", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t)
		ctx, cancel := context.WithCancel(t.Context())
		ch, err := c.Subscribe(ctx, "live", event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		ev := signed(t, b.sk, "live one")
		ok, _, err := c.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok)
		select {
		case got := <-ch:
			require.Equal(t, ev.ID, got.ID)
		case <-time.After(5 * time.Second):
			t.Fatal("no live event")
		}
		cancel()
		for range ch { // drains until closed
		}
	})

	t.Run("CloseEndsWaiters", func(t *testing.T) {
		t.Parallel()
		c, _ := setup(t)
		ch, err := c.Subscribe(t.Context(), "s", event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.NoError(t, c.Close())
		for range ch {
		}
		_, err = c.Query(t.Context(), event.Filter{})
		require.True(t, errors.Is(err, ErrClosed), err)
	})

	t.Run("AuthRefused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer ws.CloseNow()
			_ = ws.Write(r.Context(), websocket.MessageText, wire.AuthChallenge("abc"))
			_, b, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			m, _ := wire.ParseClient(b)
			_ = ws.Write(r.Context(), websocket.MessageText, wire.OK(m.Event.ID, false, wire.MsgNotRelayMember))
			_, _, _ = ws.Read(r.Context())
		}))
		t.Cleanup(srv.Close)
		_, err := Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), event.GenerateKey())
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, wire.MsgNotRelayMember, refused.Message)
	})
}
