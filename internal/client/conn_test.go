package client

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// testBundle is what a client test talks to: a whole relay on its own
// database and the WebSocket URL and key the client dials it with.
type testBundle struct {
	relay *relaytest.Relay
	url   string
	sk    []byte
}

// setup starts a relay with env and dials it as a fresh key.
func setup(t *testing.T, env map[string]string) (*Conn, *testBundle) {
	t.Helper()
	r := relaytest.Start(t, env)
	b := &testBundle{relay: r, url: "ws://" + r.Host, sk: event.GenerateKey()}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.url, b.sk)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, b
}

// signed is a kind 1 note by sk.
func signed(t *testing.T, sk []byte, content string) event.Event {
	t.Helper()
	return signedKind(t, sk, event.KindNote, content)
}

func signedKind(t *testing.T, sk []byte, kind int, content string, tags ...event.Tag) event.Event {
	t.Helper()
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: kind, Content: content, Tags: tags}
	require.NoError(t, ev.Sign(sk))
	return ev
}

// receive waits for the next event on ch, failing after 10 s or when ch closes.
func receive(t *testing.T, ch <-chan event.Event) event.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "subscription closed before an event came")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
		return event.Event{}
	}
}

// drained waits until ch is closed, failing after 10 s.
func drained(t *testing.T, ch <-chan event.Event) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("subscription channel not closed within 10 s")
		}
	}
}

func TestConn(t *testing.T) {
	t.Parallel()

	t.Run("PublishConcurrent", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, nil)
		require.Equal(t, event.PubKey(b.sk), c.PubKey())
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
				if err == nil && msg != "" {
					err = errors.New("accepted with a message: " + msg)
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
		// Each OK reached the caller that sent its event: the relay stored
		// every one of them exactly once.
		got, err := c.Query(ctx, event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		ids := make([]string, len(got))
		for i, ev := range got {
			ids[i] = ev.ID
		}
		want := make([]string, len(evs))
		for i, ev := range evs {
			want[i] = ev.ID
		}
		require.ElementsMatch(t, want, ids)
		// QueryCount counts the same frames without decoding them, and a
		// Query running beside it still decodes its own.
		var counted int64
		var wg2 sync.WaitGroup
		wg2.Go(func() { counted, err = c.QueryCount(ctx, event.Filter{Kinds: []int{1}}) })
		again, qerr := c.Query(ctx, event.Filter{Kinds: []int{1}})
		wg2.Wait()
		require.NoError(t, err)
		require.NoError(t, qerr)
		require.EqualValues(t, 32, counted)
		require.Len(t, again, 32)
		limit := 5
		counted, err = c.QueryCount(ctx, event.Filter{Kinds: []int{1}, Limit: &limit})
		require.NoError(t, err)
		require.EqualValues(t, 5, counted)
	})

	t.Run("PublishRefused", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, nil)
		ok, msg, err := c.Publish(t.Context(), signedKind(t, b.sk, event.KindStreamMessage, "no channel"))
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, "invalid: channel-scoped events must include an h tag", msg)
	})

	t.Run("PublishDuplicate", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, nil)
		ev := signed(t, b.sk, "twice")
		ok, msg, err := c.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok, msg)
		require.Empty(t, msg)
		ok, msg, err = c.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, wire.MsgDuplicate, msg)
	})

	t.Run("QueryUntilEOSE", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, nil)
		ev := signed(t, b.sk, "stored")
		ok, msg, err := c.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok, msg)
		got, err := c.Query(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, ev, got[0])
		// The query's subscription was closed at EOSE: the id is free for
		// the next query and nothing more arrives for it.
		got, err = c.Query(t.Context(), event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Len(t, got, 1)
	})

	t.Run("QueryClosed", func(t *testing.T) {
		t.Parallel()
		c, _ := setup(t, nil)
		_, err := c.Query(t.Context(), event.Filter{Kinds: []int{event.KindGiftWrap}})
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, "query", refused.Op)
		require.Zero(t, refused.Status)
		require.Equal(t, "restricted: p-gated events require #p matching your pubkey", refused.Message)
	})

	t.Run("CountClosed", func(t *testing.T) {
		t.Parallel()
		c, _ := setup(t, nil)
		_, err := c.Count(t.Context(), event.Filter{Kinds: []int{event.KindGiftWrap}})
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, "count", refused.Op)
		require.Equal(t, "restricted: p-gated kinds require #p tag matching your pubkey", refused.Message)
	})

	t.Run("SubscribeLive", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		ch, err := c.Subscribe(ctx, "live", event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		ev := signed(t, b.sk, "live one")
		ok, _, err := c.Publish(t.Context(), ev)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, ev.ID, receive(t, ch).ID)
		cancel()
		drained(t, ch)
		// The CLOSE reached the relay: the id can be used again.
		ch, err = c.Subscribe(t.Context(), "live", event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Equal(t, ev.ID, receive(t, ch).ID)
	})

	t.Run("CloseEndsWaiters", func(t *testing.T) {
		t.Parallel()
		c, _ := setup(t, nil)
		ch, err := c.Subscribe(t.Context(), "s", event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.NoError(t, c.Close())
		drained(t, ch)
		_, err = c.Query(t.Context(), event.Filter{})
		require.True(t, errors.Is(err, ErrClosed), err)
		require.NoError(t, c.Close(), "a second Close is harmless")
	})

	t.Run("CancelledCallsKeepTheConnection", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		// Each call may reach the write with its ctx already done; none may
		// take the connection down with it.
		for i := range 50 {
			_, err := c.Query(ctx, event.Filter{Kinds: []int{1}})
			require.ErrorIs(t, err, context.Canceled)
			_, err = c.Count(ctx, event.Filter{Kinds: []int{1}})
			require.ErrorIs(t, err, context.Canceled)
			_, _, err = c.Publish(ctx, signed(t, b.sk, "cancelled "+strconv.Itoa(i)))
			require.ErrorIs(t, err, context.Canceled)
			_, err = c.Subscribe(ctx, "cancelled", event.Filter{Kinds: []int{1}})
			require.ErrorIs(t, err, context.Canceled)
		}
		ev := signed(t, b.sk, "after the cancelled calls")
		ok, msg, err := c.Publish(t.Context(), ev)
		require.NoError(t, err, "the connection survived its callers giving up")
		require.True(t, ok, msg)
		got, err := c.Query(t.Context(), event.Filter{IDs: []string{ev.ID}})
		require.NoError(t, err)
		require.Len(t, got, 1)
	})

	t.Run("RelayGone", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, nil)
		ch, err := c.Subscribe(t.Context(), "s", event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		b.relay.Stop()
		drained(t, ch)
		_, _, err = c.Publish(t.Context(), signed(t, b.sk, "too late"))
		require.ErrorIs(t, err, ErrClosed)
		_, err = c.Count(t.Context(), event.Filter{Kinds: []int{1}})
		require.ErrorIs(t, err, ErrClosed)
		var refused *RefusedError
		require.False(t, errors.As(err, &refused), "a lost connection is not a refusal: %v", err)
	})

	t.Run("AuthRefused", func(t *testing.T) {
		t.Parallel()
		owner := event.GenerateKey()
		r := relaytest.Start(t, map[string]string{
			"BUZZ_REQUIRE_RELAY_MEMBERSHIP": "true", "RELAY_OWNER_PUBKEY": event.PubKey(owner)})
		_, err := Dial(t.Context(), "ws://"+r.Host, event.GenerateKey())
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, "auth", refused.Op)
		require.Equal(t, wire.MsgNotRelayMember, refused.Message)
		// The same relay lets a member in: the refusal was about membership.
		c, err := Dial(t.Context(), "ws://"+r.Host, owner)
		require.NoError(t, err)
		require.NoError(t, c.Close())
	})
}

// TestDialHost reaches a second community on the relay's own address: the
// handshake's Host picks the community and the AUTH relay tag names it.
func TestDialHost(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	const portless = "b.soak.test" // the load tool's case: a host without the relay's port
	_, err := r.App.Store().CommunityAdd(t.Context(), store.CommunityAddParams{Host: portless})
	require.NoError(t, err)
	ported := r.Community(t, "c.soak.test") // host:port, used verbatim
	url := "ws://127.0.0.1:" + strconv.Itoa(r.Port) + "/"
	sk := event.GenerateKey()
	ctx := t.Context()

	first, err := Dial(ctx, url, sk) // 127.0.0.1 is the deployment host
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Close() })
	mine := signed(t, sk, "deployment only")
	ok, msg, err := first.Publish(ctx, mine)
	require.NoError(t, err)
	require.True(t, ok, msg)

	for _, host := range []string{portless, ported} {
		c, err := DialHost(ctx, url, host, sk)
		require.NoError(t, err, host)
		t.Cleanup(func() { _ = c.Close() })
		require.Equal(t, event.PubKey(sk), c.PubKey())
		ev := signed(t, sk, "only in "+host)
		ok, msg, err := c.Publish(ctx, ev)
		require.NoError(t, err)
		require.True(t, ok, msg)
		// Readable in its community, where the deployment's note is not,
		// and not from the deployment host.
		got, err := c.Query(ctx, event.Filter{Kinds: []int{1}})
		require.NoError(t, err)
		require.Equal(t, []event.Event{ev}, got, host)
		got, err = first.Query(ctx, event.Filter{IDs: []string{ev.ID}})
		require.NoError(t, err)
		require.Empty(t, got, host)
	}
	got, err := first.Query(ctx, event.Filter{Kinds: []int{1}})
	require.NoError(t, err)
	require.Equal(t, []event.Event{mine}, got)

	// A host the relay does not serve fails the handshake.
	_, err = DialHost(ctx, url, "nowhere.test", sk)
	require.Error(t, err)
}
