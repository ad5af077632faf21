package window_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nbd-wtf/go-nostr"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/window"
)

// world is a whole relay started with BUZZ_RELAY_PRIVATE_KEY, its
// deployment community, and an owner connected over WebSocket who
// creates channels and publishes through ingest.
type world struct {
	r     *relaytest.Relay
	cid   string
	self  string // NIP-11 self
	owner eventtest.Key
	ws    *relaytest.WS
	pool  *pgxpool.Pool
}

func setup(t *testing.T) *world { return start(t, true) }

// start runs the relay, with BUZZ_RELAY_PRIVATE_KEY when keyed; without
// it NIP-11 must advertise no self, and the world's self stays "".
func start(t *testing.T, keyed bool) *world {
	t.Helper()
	// The test's WebSocket answers pings only while it reads: no ping
	// during a test, so a long fixture does not close it.
	vars := map[string]string{"TEST_HEARTBEAT": "1h"}
	if keyed {
		vars["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(event.GenerateKey())
	}
	r := relaytest.Start(t, vars)
	w := &world{r: r, owner: eventtest.NewKey(), pool: r.App.Pool()}
	c, err := r.App.Store().CommunityByHost(context.Background(), r.Host)
	require.NoError(t, err)
	w.cid = c.ID
	status, body := r.Do(t, relaytest.Request{Method: http.MethodGet, Path: "/", Header: map[string]string{"Accept": "application/nostr+json"}})
	require.Equal(t, http.StatusOK, status)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(body, &doc))
	if keyed {
		require.Len(t, doc["self"], 64, "NIP-11 advertises self with BUZZ_RELAY_PRIVATE_KEY")
		w.self = doc["self"].(string)
	} else {
		require.NotContains(t, doc, "self", "no self without BUZZ_RELAY_PRIVATE_KEY")
	}
	w.ws = r.Dial(t, "")
	w.ws.Auth(w.owner)
	return w
}

// channel creates a channel owned by w.owner through ingest; opts add tags
// to the 9007 (eventtest.Tag("visibility","private")).
func (w *world) channel(t *testing.T, opts ...eventtest.Option) string {
	t.Helper()
	id := uuid.NewString()
	base := []eventtest.Option{eventtest.Content("n-" + uuid.NewString()[:8]), eventtest.Channel(id), eventtest.Tag("name", "c-"+id[:8])}
	w.ws.MustPublish(w.owner.Signed(t, event.KindCreateGroup, append(base, opts...)...))
	return id
}

// private creates a private channel with members besides the owner.
func (w *world) private(t *testing.T, members ...eventtest.Key) string {
	t.Helper()
	ch := w.channel(t, eventtest.Tag("visibility", "private"))
	for _, m := range members {
		w.put(t, w.ws, ch, m)
	}
	return ch
}

// put adds member to ch (kind 9000) through ws, authenticated as the owner.
func (w *world) put(t *testing.T, ws *relaytest.WS, ch string, member eventtest.Key) {
	t.Helper()
	ws.MustPublish(w.owner.Signed(t, event.KindPutUser, eventtest.Content("n-"+uuid.NewString()[:8]), eventtest.Channel(ch),
		eventtest.Tag("p", member.PubKey)))
}

// remove removes member from ch (kind 9001) through ws.
func (w *world) remove(t *testing.T, ws *relaytest.WS, ch string, member eventtest.Key) {
	t.Helper()
	ws.MustPublish(w.owner.Signed(t, event.KindRemoveUser, eventtest.Content("n-"+uuid.NewString()[:8]), eventtest.Channel(ch),
		eventtest.Tag("p", member.PubKey)))
}

// publish signs ev by w.owner and publishes it through ingest.
func (w *world) publish(t *testing.T, kind int, opts ...eventtest.Option) event.Event {
	t.Helper()
	ev := w.owner.Signed(t, kind, opts...)
	w.ws.MustPublish(ev)
	return ev
}

// root publishes a kind 9 top-level message in ch at ts.
func (w *world) root(t *testing.T, ch string, ts int64) event.Event {
	t.Helper()
	return w.publish(t, event.KindStreamMessage, eventtest.Channel(ch), eventtest.At(ts), eventtest.Content("root "+uuid.NewString()))
}

// replyOpts are the tags of a NIP-10 marked reply to parent in root's
// thread, at ts.
func replyOpts(ch string, root, parent event.Event, ts int64, content string) []eventtest.Option {
	return []eventtest.Option{eventtest.Channel(ch), eventtest.At(ts), eventtest.Content(content),
		eventtest.Tag("e", root.ID, "", "root"), eventtest.Tag("e", parent.ID, "", "reply")}
}

// reply publishes a kind 9 reply to parent through ingest.
func (w *world) reply(t *testing.T, ch string, root, parent event.Event, ts int64, content string) event.Event {
	t.Helper()
	return w.publish(t, event.KindStreamMessage, replyOpts(ch, root, parent, ts, content)...)
}

// store writes signed events straight into the relay's database (for
// sizes and shapes ingest refuses, or for bulk fixtures); channel is each
// event's h tag.
func (w *world) store(t *testing.T, evs ...event.Event) {
	t.Helper()
	ctx := context.Background()
	b := &pgx.Batch{}
	for i := range evs {
		ev := &evs[i]
		id, _ := hex.DecodeString(ev.ID)
		pub, _ := hex.DecodeString(ev.PubKey)
		sig, _ := hex.DecodeString(ev.Sig)
		tags, err := json.Marshal(ev.Tags)
		require.NoError(t, err)
		var channel *string
		if hs := ev.Tags.Values("h"); len(hs) > 0 {
			channel = &hs[0]
		}
		b.Queue(`INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
			VALUES ($1, $2, $3, to_timestamp($4), $5, $6, $7, $8, $9)`, w.cid, id, pub, ev.CreatedAt, ev.Kind, string(tags), ev.Content, sig, channel)
	}
	require.NoError(t, w.pool.SendBatch(ctx, b).Close())
}

// storeReply writes a depth-1 (or deeper) reply straight into the
// database with its thread row, as ingest would.
func (w *world) storeReply(t *testing.T, ch string, root event.Event, parent event.Event, depth int, ev event.Event) {
	t.Helper()
	w.store(t, ev)
	err := store.New(w.pool).ThreadReplyAdd(context.Background(), store.ThreadReplyParams{CommunityID: w.cid, Channel: ch,
		EventID: ev.ID, CreatedAt: ev.CreatedAt, ParentID: parent.ID, ParentCreatedAt: parent.CreatedAt,
		RootID: root.ID, RootCreatedAt: root.CreatedAt, Depth: depth})
	require.NoError(t, err)
}

// page is one window's share of a /query answer.
type page struct {
	rows    []event.Event
	aux     []event.Event
	bounds  event.Event
	hasMore bool
	next    *window.Cursor
}

// answer is a /query answer.
type answer struct {
	status int
	body   string
	events []event.Event
}

// query posts filters to /query as reader.
func (w *world) query(t *testing.T, reader eventtest.Key, filters ...string) answer {
	t.Helper()
	status, body := w.r.HTTP(t, "", http.MethodPost, "/query", &reader, []byte("["+strings.Join(filters, ",")+"]"))
	a := answer{status: status, body: string(body)}
	if status == http.StatusOK {
		require.NoError(t, json.Unmarshal(body, &a.events), string(body))
	}
	return a
}

// requireError asserts a failed answer with exactly text and no events.
func (a answer) requireError(t *testing.T, status int, text string) {
	t.Helper()
	require.Equal(t, status, a.status, a.body)
	want, _ := json.Marshal(map[string]string{"error": text})
	require.JSONEq(t, string(want), a.body)
}

// windows splits a 200 answer into one page per 39007, checking each
// bounds event as a client must: signed by NIP-11 self (verified with
// go-nostr), tags exactly d/h/e, d the binding of its own request,
// version and direction, next_cursor null exactly when has_more is false.
// reqs are the filters' requests in order; each must yield a page.
func (w *world) windows(t *testing.T, a answer, reader eventtest.Key, reqs ...window.ThreadRequest) []page {
	t.Helper()
	require.Equal(t, http.StatusOK, a.status, a.body)
	var pages []page
	cur := page{}
	for _, ev := range a.events {
		switch {
		case ev.Kind == 39007:
			require.Less(t, len(pages), len(reqs), "more bounds than windows")
			r := reqs[len(pages)]
			verifySigned(t, ev, w.self)
			require.Equal(t, event.Tags{{"d", window.Binding(w.r.Host, reader.PubKey, r)}, {"h", r.Channel}, {"e", r.Root}}, ev.Tags)
			var c struct {
				Version    int    `json:"version"`
				Direction  string `json:"direction"`
				HasMore    *bool  `json:"has_more"`
				NextCursor *struct {
					CreatedAt int64  `json:"created_at"`
					ID        string `json:"id"`
				} `json:"next_cursor"`
			}
			require.NoError(t, json.Unmarshal([]byte(ev.Content), &c), ev.Content)
			require.Equal(t, 1, c.Version)
			require.Equal(t, "older", c.Direction)
			require.NotNil(t, c.HasMore)
			require.Equal(t, *c.HasMore, c.NextCursor != nil, "next_cursor is null exactly when has_more is false")
			cur.bounds, cur.hasMore = ev, *c.HasMore
			if c.NextCursor != nil {
				cur.next = &window.Cursor{CreatedAt: c.NextCursor.CreatedAt, ID: c.NextCursor.ID}
			}
			pages = append(pages, cur)
			cur = page{}
		case event.ThreadKinds.Has(ev.Kind) && len(cur.aux) == 0:
			cur.rows = append(cur.rows, ev)
		default:
			cur.aux = append(cur.aux, ev)
		}
	}
	require.Empty(t, cur.rows, "rows after the last bounds")
	require.Empty(t, cur.aux, "aux after the last bounds")
	require.Len(t, pages, len(reqs), "one bounds per served window")
	return pages
}

// verifySigned checks ev with go-nostr: id, signature, and signer (any
// when self is "").
func verifySigned(t *testing.T, ev event.Event, self string) {
	t.Helper()
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	var ne nostr.Event
	require.NoError(t, json.Unmarshal(b, &ne))
	require.True(t, ne.CheckID(), "id of kind %d", ev.Kind)
	ok, err := ne.CheckSignature()
	require.NoError(t, err)
	require.True(t, ok, "signature of kind %d", ev.Kind)
	if self != "" {
		require.Equal(t, self, ne.PubKey, "signed by NIP-11 self")
	}
}

// filter is a thread-window filter for r, as a client would write it.
func filter(r window.ThreadRequest) string {
	kinds, _ := json.Marshal(r.Kinds)
	s := fmt.Sprintf(`{"thread_window":true,"#h":["%s"],"#e":["%s"],"kinds":%s,"limit":%d,"depth_limit":%d`,
		r.Channel, r.Root, kinds, r.Limit, r.Depth)
	if r.Cursor != nil {
		s += fmt.Sprintf(`,"until":%d,"before_id":"%s"`, r.Cursor.CreatedAt, r.Cursor.ID)
	}
	if r.IncludeAux {
		s += `,"include_aux":true`
	}
	return s + "}"
}

// req is a head request with the defaults for root in ch, kind 9 rows.
func req(ch string, root event.Event) window.ThreadRequest {
	return window.ThreadRequest{Channel: ch, Root: root.ID, Limit: 50, Depth: 100, Kinds: []int{9}}
}

// ids returns the events' ids.
func ids(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i := range evs {
		out[i] = evs[i].ID
	}
	return out
}

// newestFirst sorts a copy of evs by created_at DESC, id ASC.
func newestFirst(evs []event.Event) []event.Event {
	out := append([]event.Event(nil), evs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && before(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func before(a, b event.Event) bool {
	return a.CreatedAt > b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.ID < b.ID)
}

// now is a base time inside ingest's drift window.
func now() int64 { return time.Now().Unix() - 600 }

func hexBytes(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

func itoa(i int) string { return strconv.Itoa(i) }

// tagsJSON is ev's tags as stored.
func tagsJSON(t *testing.T, ev event.Event) string {
	t.Helper()
	b, err := json.Marshal(ev.Tags)
	require.NoError(t, err)
	return string(b)
}
