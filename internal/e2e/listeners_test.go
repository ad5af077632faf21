package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// docs/PROTOCOL.md §15.3, §15.4 through a whole relay: a configured listener registers
// a target over HTTP (NIP-98 against RELAY_OPERATOR_API_ORIGIN), and a
// mention of that target in a kind 9 has its outbox row by the time its
// OK arrives; other kinds and duplicates enqueue nothing.
func TestListenerEnqueue(t *testing.T) {
	t.Parallel()
	listener := eventtest.NewKey()
	const origin = "https://ops.example"
	r := relaytest.Start(t, map[string]string{
		"BUZZ_OPERATOR_LISTENERS":   listener.PubKey + ":https://listener.example/hook",
		"RELAY_OPERATOR_API_ORIGIN": origin,
	})
	cid := communityID(t, r, r.Host)
	target, other := eventtest.NewKey(), eventtest.NewKey()
	body := []byte(`{"pubkeys":["` + target.PubKey + `"]}`)
	sum := sha256.Sum256(body)
	tok := relaytest.Token(t, listener, origin+"/operator/listener/pubkeys", http.MethodPost, eventtest.Tag("payload", hex.EncodeToString(sum[:])))
	status, resp := r.Do(t, relaytest.Request{Path: "/operator/listener/pubkeys", Body: body, Authorization: tok})
	require.Equal(t, http.StatusOK, status, string(resp))

	outbox := func(id string) int {
		t.Helper()
		eid, _ := hex.DecodeString(id)
		var n int
		require.NoError(t, r.App.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1 AND event_id = $2`, cid, eid).Scan(&n))
		return n
	}
	author := eventtest.NewKey()
	w := r.Dial(t, "")
	w.Auth(author)
	ch := insertChannel(t, r, cid, author, channelOpts{})
	mention := author.Signed(t, event.KindStreamMessage, eventtest.Channel(ch),
		eventtest.Tag("p", target.PubKey), eventtest.Tag("p", other.PubKey), eventtest.Tag("p", "not-hex"))
	w.MustPublish(mention)
	require.Equal(t, 1, outbox(mention.ID), "one row per matching registration, committed with the OK")
	ok, msg := w.Publish(mention)
	require.True(t, ok)
	require.Equal(t, "duplicate:", msg)
	require.Equal(t, 1, outbox(mention.ID), "a duplicate enqueues nothing")

	note := author.Signed(t, event.KindNote, eventtest.Tag("p", target.PubKey))
	w.MustPublish(note)
	require.Zero(t, outbox(note.ID), "kind 1 is not a mention kind")
	reaction := author.Signed(t, event.KindReaction, eventtest.Channel(ch), eventtest.Tag("e", mention.ID), eventtest.Tag("p", target.PubKey))
	w.MustPublish(reaction)
	require.Zero(t, outbox(reaction.ID), "reactions are not mention kinds")
	reply := author.Signed(t, event.KindStreamMessage, eventtest.Channel(ch), eventtest.Tag("e", mention.ID, "", "root"),
		eventtest.Tag("p", target.PubKey))
	w.MustPublish(reply)
	require.Equal(t, 1, outbox(reply.ID), "replies take the thread path and enqueue too")
}

// docs/PROTOCOL.md §15.4 through a whole relay: when the outbox insert fails for
// real, the mention event is not stored and the client gets the internal
// error; once the fault is gone the same event is accepted with its row.
func TestListenerEnqueueFailureRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	listener, target := eventtest.NewKey(), eventtest.NewKey()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_OPERATOR_LISTENERS":   listener.PubKey + ":https://listener.example/hook",
		"RELAY_OPERATOR_API_ORIGIN": "https://ops.example",
	})
	cid := communityID(t, r, r.Host)
	require.NoError(t, r.App.Store().ListenerRegister(ctx, listener.PubKey, []string{target.PubKey}))
	_, err := r.App.Pool().Exec(ctx, `ALTER TABLE operator_listener_outbox ADD CONSTRAINT fault CHECK (false) NOT VALID`)
	require.NoError(t, err)
	author := eventtest.NewKey()
	w := r.Dial(t, "")
	w.Auth(author)
	ch := insertChannel(t, r, cid, author, channelOpts{})
	mention := author.Signed(t, event.KindStreamMessage, eventtest.Channel(ch), eventtest.Tag("p", target.PubKey))
	ok, msg := w.Publish(mention)
	require.False(t, ok)
	require.Equal(t, "error: internal server error", msg)
	var n int
	eid, _ := hex.DecodeString(mention.ID)
	require.NoError(t, r.App.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2`, cid, eid).Scan(&n))
	require.Zero(t, n, "the event rolled back with its outbox row")

	_, err = r.App.Pool().Exec(ctx, `ALTER TABLE operator_listener_outbox DROP CONSTRAINT fault`)
	require.NoError(t, err)
	w.MustPublish(mention)
	require.NoError(t, r.App.Pool().QueryRow(ctx, `SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1 AND event_id = $2`, cid, eid).Scan(&n))
	require.Equal(t, 1, n)
}
