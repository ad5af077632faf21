package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/store"
)

// retryOnce makes the first COMMIT of a transaction holding a chosen event
// fail with a real serialization failure (SQLSTATE 40001), raised by a
// deferred constraint trigger on events, so pg.InTx runs the whole apply a
// second time. A sequence per event counts the commits tried.
type retryOnce struct {
	b *testBundle
	n atomic.Int64
}

func newRetryOnce(t *testing.T, b *testBundle) *retryOnce {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `
		CREATE TABLE test_retry (id bytea PRIMARY KEY, seq text NOT NULL);
		CREATE FUNCTION test_retry() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
		  s text;
		BEGIN
		  SELECT seq INTO s FROM test_retry WHERE id = NEW.id;
		  IF FOUND AND nextval(s::regclass) = 1 THEN
		    RAISE EXCEPTION 'injected serialization failure' USING ERRCODE = 'serialization_failure';
		  END IF;
		  RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER test_retry AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED
		  FOR EACH ROW EXECUTE FUNCTION test_retry();`)
	require.NoError(t, err)
	return &retryOnce{b: b}
}

// arm makes the first commit holding ev fail; attempts reports how many
// commits holding it were tried.
func (r *retryOnce) arm(t *testing.T, ev event.Event) (attempts func() int) {
	t.Helper()
	seq := fmt.Sprintf("test_retry_%d", r.n.Add(1))
	ctx := context.Background()
	_, err := r.b.pool.Exec(ctx, "CREATE SEQUENCE "+seq)
	require.NoError(t, err)
	_, err = r.b.pool.Exec(ctx, `INSERT INTO test_retry (id, seq) VALUES ($1, $2)`, unhex(t, ev.ID), seq)
	require.NoError(t, err)
	return func() int {
		var n int
		require.NoError(t, r.b.pool.QueryRow(ctx, "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM "+seq).Scan(&n))
		return n
	}
}

// TestRetriedApply runs each transactional family's apply twice: the first
// run is rolled back by a real 40001 at COMMIT, the second commits. The
// stored result must be exactly that of one run, so apply must not have
// changed what authorize returned.
func TestRetriedApply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	retry := newRetryOnce(t, b)
	now := time.Now().Unix()
	cases := []familyCase{
		{name: "GroupCreate", build: by(event.KindCreateGroup, eventtest.Tag("name", "retried")),
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ref, _ := b.lookup(t, ev.ID)
				require.Equal(t, "owner", b.role(t, ref.Channel, eventtest.Key{PubKey: ev.PubKey}))
				require.Equal(t, []int{39000, 39001, 39002, 44100}, b.fanout.relayFanout(b.relay.PubKey, ref.Channel))
				for _, k := range []int{39000, 39001, 39002, 44100} {
					require.Equal(t, 1, b.relayEvents(t, k, ref.Channel), "kind %d", k)
				}
			}},
		{name: "Unarchive", build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
			owner := eventtest.NewKey()
			ch := b.channel(t, owner)
			b.join(t, eventtest.NewKey(), ch)
			b.mustSubmit(t, owner, owner.Signed(t, event.KindEditMetadata, eventtest.Channel(ch), eventtest.Tag("archived", "true")))
			return owner, owner.Signed(t, event.KindEditMetadata, eventtest.Channel(ch), eventtest.Tag("archived", "false"), eventtest.At(now+1))
		}, check: func(t *testing.T, b *testBundle, ev event.Event) {
			ch := ev.Tags.First("h").Value()
			require.Equal(t, 4, b.relayEvents(t, event.KindMemberAdded, ch), "creation, join, and one per member on unarchive")
			require.Equal(t, 1, b.relayEvents(t, event.KindGroupMetadata, ch))
		}},
		{name: "RemoveUser", build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
			owner, m := eventtest.NewKey(), eventtest.NewKey()
			ch := b.channel(t, owner)
			b.join(t, m, ch)
			return owner, owner.Signed(t, event.KindRemoveUser, eventtest.Channel(ch), eventtest.Tag("p", m.PubKey))
		}, check: func(t *testing.T, b *testBundle, ev event.Event) {
			ch := ev.Tags.First("h").Value()
			require.Equal(t, 1, b.relayEvents(t, event.KindMemberRemoved, ch))
			require.Equal(t, []string{ev.Tags.First("p").Value()}, b.evictions(ch))
		}},
		{name: "Reaction", build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
			k := eventtest.NewKey()
			target := b.mustSubmit(t, k, k.Signed(t, event.KindNote))
			return k, k.Signed(t, event.KindReaction, eventtest.Tag("e", target.ID))
		}, check: func(t *testing.T, b *testBundle, ev event.Event) {
			require.Equal(t, 1, b.reactions(t, ev.Tags.First("e").Value()))
		}},
		{name: "Reply", build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
			k, ch, parent := member(t, b, event.KindStreamMessage)
			return k, k.Signed(t, event.KindStreamMessage, eventtest.Channel(ch), reply(parent.ID))
		}, check: func(t *testing.T, b *testBundle, ev event.Event) {
			_, parent := markedRefs(ev.Tags)
			top, _, err := store.New(b.pool).ThreadGet(context.Background(), b.tenant.CommunityID, parent)
			require.NoError(t, err)
			require.Equal(t, 1, top.ReplyCount)
		}},
		{name: "Deletion", build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
			k := eventtest.NewKey()
			target := b.mustSubmit(t, k, k.Signed(t, event.KindNote))
			return k, k.Signed(t, event.KindDeletion, eventtest.Tag("e", target.ID))
		}, check: func(t *testing.T, b *testBundle, ev event.Event) {
			require.False(t, b.live(t, ev.Tags.First("e").Value()))
		}},
		{name: "Profile", build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
			k := eventtest.NewKey()
			b.mustSubmit(t, k, k.Signed(t, event.KindProfile, eventtest.Content(`{}`), eventtest.At(now-1)))
			return k, k.Signed(t, event.KindProfile, eventtest.Content(`{"nip05":"r@relay.test"}`), eventtest.At(now))
		}, check: func(t *testing.T, b *testBundle, ev event.Event) {
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM events WHERE community_id = $1 AND pubkey = $2 AND kind = 0 AND deleted_at IS NULL`,
				b.tenant.CommunityID, unhex(t, ev.PubKey)))
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM users WHERE community_id = $1 AND nip05_handle = 'r@relay.test'`, b.tenant.CommunityID))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			author, ev := tc.build(t, b)
			attempts := retry.arm(t, ev)
			res := b.submit(t, author, ev)
			require.Equal(t, Result{Code: Accepted}, Result{Code: res.Code, Message: res.Message})
			if res.After != nil {
				res.After()
			}
			require.Equal(t, 2, attempts(), "the first commit failed with 40001 and apply ran again")
			require.True(t, b.live(t, ev.ID))
			require.Equal(t, 1, b.intents(t, ev.ID))
			tc.check(t, b, ev)
		})
	}
}

// TestFailureNamesStep: the event failed log line says which step and
// family failed; the client only sees the internal error.
func TestFailureNamesStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	logs := &logtest.Buffer{}
	cfg := b.p.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.SignFunc = func(*event.Event) error { return errors.New("no signer") }
	p := New(cfg)
	t.Cleanup(p.Close)
	k := eventtest.NewKey()
	internal := Result{Code: Internal, Message: "error: internal server error"}

	create := k.Signed(t, event.KindCreateGroup, eventtest.Tag("name", "x"))
	res := p.Submit(context.Background(), b.request(k, create))
	require.Equal(t, internal, res)
	require.Contains(t, logs.String(), "apply group: follow-up 39000: sign: no signer")
	_, found := b.lookup(t, create.ID)
	require.False(t, found)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg := k.Signed(t, event.KindStreamMessage, eventtest.Channel("00000000-0000-4000-8000-000000000001"))
	require.Equal(t, internal, p.Submit(ctx, b.request(k, msg)))
	require.Contains(t, logs.String(), "authorize thread: channel access 00000000-0000-4000-8000-000000000001: ")
}
