package ingest

import (
	"context"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// testBundle is a real Pipeline on its own migrated database.
type testBundle struct {
	p      *Pipeline
	pool   *pgxpool.Pool
	store  *store.Store
	tenant tenant.Tenant
	relay  eventtest.Key
	fanout *recorder
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	s := store.New(pool)
	c, err := s.CommunityEnsure(context.Background(), "relay.test")
	require.NoError(t, err)
	b := &testBundle{pool: pool, store: s, tenant: tenant.Tenant{CommunityID: c.ID, Host: "relay.test"},
		relay: eventtest.NewKey(), fanout: &recorder{}}
	b.p = New(Config{Pool: pool, Live: b.fanout, RelayKey: b.relay.SK, AuditEnabled: true})
	t.Cleanup(b.p.Close)
	return b
}

// evictions returns the evictions asked for on channel.
func (b *testBundle) evictions(channel string) []string {
	r := b.fanout
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{}
	for _, e := range r.evicted {
		if strings.HasPrefix(e, channel+" ") {
			out = append(out, strings.TrimPrefix(e, channel+" "))
		}
	}
	return out
}

// recorder is the pipeline's live side in these tests: it keeps what the
// pipeline fanned out and the evictions it asked for, as "channel pubkey"
// ("*" for every holder, "non-members"). Access caches and interruptions
// are the relay's (tested over real sockets in package e2e).
type recorder struct {
	mu      sync.Mutex
	got     []Delivery
	evicted []string
	// unsettled are the communities of Unsettled calls.
	unsettled []string
}

func (r *recorder) Forget(_, _, _ string) {}

func (r *recorder) Evict(_, channel, pubkey string, nonMembersOnly func(string) bool) {
	switch {
	case nonMembersOnly != nil:
		pubkey = "non-members"
	case pubkey == "":
		pubkey = "*"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evicted = append(r.evicted, channel+" "+pubkey)
}

func (r *recorder) Interrupt(string) {}

func (r *recorder) Unsettled(cid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsettled = append(r.unsettled, cid)
}

func (r *recorder) Broadcast(d Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, d)
}

// relayFanout lists, in order, the kinds of the relay-signed events about
// channel that were fanned out.
func (r *recorder) relayFanout(relay, channel string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []int{}
	for _, d := range r.got {
		if d.Event.PubKey == relay && (d.Channel == channel || d.Event.Tags.HasValue("h", channel)) {
			out = append(out, d.Event.Kind)
		}
	}
	return out
}

func (b *testBundle) request(author eventtest.Key, ev event.Event) Request {
	return Request{Tenant: b.tenant, Author: author.PubKey, Source: SourceWebSocket, Event: ev}
}

// submit runs ev, signed by author, through the pipeline.
func (b *testBundle) submit(t *testing.T, author eventtest.Key, ev event.Event) Result {
	t.Helper()
	return b.p.Submit(context.Background(), b.request(author, ev))
}

// mustSubmit submits ev and requires it to be accepted.
func (b *testBundle) mustSubmit(t *testing.T, author eventtest.Key, ev event.Event) event.Event {
	t.Helper()
	res := b.submit(t, author, ev)
	require.Equal(t, Result{Code: Accepted}, Result{Code: res.Code, Message: res.Message}, "event %d", ev.Kind)
	return ev
}

// channel creates a channel owned by owner through a 9007 and returns its id.
func (b *testBundle) channel(t *testing.T, owner eventtest.Key, opts ...eventtest.Option) string {
	t.Helper()
	// A content of its own: two channels of one owner in one second are two events.
	ev := owner.Signed(t, event.KindCreateGroup, append([]eventtest.Option{eventtest.Tag("name", "c"), eventtest.Content(uuid.NewString())}, opts...)...)
	b.mustSubmit(t, owner, ev)
	ch, err := store.New(b.pool).EventLookup(context.Background(), b.tenant.CommunityID, ev.ID)
	require.NoError(t, err)
	require.NotEmpty(t, ch.Channel)
	return ch.Channel
}

// join adds who to an open channel through a 9021.
func (b *testBundle) join(t *testing.T, who eventtest.Key, channel string) {
	t.Helper()
	b.mustSubmit(t, who, who.Signed(t, event.KindJoinRequest, eventtest.Channel(channel)))
}

func (b *testBundle) lookup(t *testing.T, id string) (store.EventRef, bool) {
	t.Helper()
	ref, err := store.New(b.pool).EventLookup(context.Background(), b.tenant.CommunityID, id)
	if err != nil {
		require.ErrorContains(t, err, "not found")
		return store.EventRef{}, false
	}
	return ref, true
}

// stored reports whether the event is stored and live.
func (b *testBundle) live(t *testing.T, id string) bool {
	t.Helper()
	ref, ok := b.lookup(t, id)
	return ok && !ref.Deleted
}

func (b *testBundle) role(t *testing.T, channel string, who eventtest.Key) string {
	t.Helper()
	st, err := store.New(b.pool).ChannelStateGet(context.Background(), b.tenant.CommunityID, channel, who.PubKey)
	require.NoError(t, err)
	return st.Role
}

// count runs a count(*) over what was stored (assertions only).
func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (b *testBundle) mentions(t *testing.T, id string) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`, b.tenant.CommunityID, unhex(t, id))
}

func (b *testBundle) intents(t *testing.T, objectID string) int {
	t.Helper()
	return b.count(t, `SELECT (SELECT count(*) FROM audit_outbox WHERE community_id = $1 AND object_id = $2)
		+ (SELECT count(*) FROM audit_intent_groups g, unnest(g.object_ids) AS o(id) WHERE g.community_id = $1 AND o.id = $2)`,
		b.tenant.CommunityID, objectID)
}

func (b *testBundle) reactions(t *testing.T, target string) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM reactions WHERE community_id = $1 AND event_id = $2 AND removed_at IS NULL`,
		b.tenant.CommunityID, unhex(t, target))
}

// relayEvents counts the live relay-signed events of kind about channel.
func (b *testBundle) relayEvents(t *testing.T, kind int, channel string) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM events WHERE community_id = $1 AND kind = $2 AND pubkey = $3
		AND deleted_at IS NULL AND (channel_id = $4::uuid OR tags @> jsonb_build_array(jsonb_build_array('h', $4::text)))`,
		b.tenant.CommunityID, kind, unhex(t, b.relay.PubKey), channel)
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	out, err := hex.DecodeString(s)
	require.NoError(t, err)
	return out
}
