package windowbench

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/benchload"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/window"
)

// benchHost is the benchmark's community; requests carry it as their Host.
const benchHost = "bench.local"

// fixture is what the cases need to know about the loaded data.
type fixture struct {
	communityID string
	channel     string
	// root is R; replies are R's replies newest first (created_at DESC,
	// id ASC), deleted ones included: the positions the benchmark draws cursors from.
	root    window.Cursor
	replies []window.Cursor
	// authors sign the fixture; the burst authors are the first ones.
	authors []author
	// end is the created_at of the newest fixture reply.
	end int64
	// Figures for the report.
	Events      int     `json:"events"`
	ThreadRows  int     `json:"thread_metadata_rows"`
	Deleted     int     `json:"deleted_replies"`
	SpanSeconds int64   `json:"span_seconds"`
	LoadSeconds float64 `json:"load_seconds"`
}

// tnode is one thread_metadata row being built: a root (depth 0) or a
// reply. Counters follow ingest: a live reply counts in its parent's
// reply_count and its root's descendant_count; every reply, deleted or
// not, moved its parent's last_reply_at.
type tnode struct {
	id            [32]byte
	at            int64
	parent, root  int32 // indexes into nodes; -1 for a root
	depth         int8
	deleted       bool
	replies, desc int32
	last          int64
}

// threadState is where a root's next reply hangs: replies cycle through
// depths 1, 2, 3, each under the root, the root's latest depth-1 reply and
// its latest depth-2 reply.
type threadState struct {
	node       int32 // the root's node
	n          int
	lastDepth1 int32
	lastDepth2 int32
}

// builder generates the fixture's events in created_at order.
type builder struct {
	s           sizes
	rng         *rand.Rand
	authors     []author
	communityID string
	channel     string
	nodes       []tnode
	out         chan<- []benchload.Event
	batch       []benchload.Event
	events      int
	deleted     int
}

const batchRows = 2000

func (b *builder) emit(e benchload.Event) {
	b.batch = append(b.batch, e)
	b.events++
	if len(b.batch) == batchRows {
		b.out <- b.batch
		b.batch = make([]benchload.Event, 0, batchRows)
	}
}

func (b *builder) flush() {
	if len(b.batch) > 0 {
		b.out <- b.batch
		b.batch = nil
	}
}

// message builds, stamps and emits one event of kind with tags in
// channel of community.
func (b *builder) message(community, channel string, at int64, kind int, tags event.Tags, deleted bool) [32]byte {
	a := b.rng.IntN(len(b.authors))
	ev := &event.Event{CreatedAt: at, Kind: kind, Tags: tags, Content: content(b.rng, b.s.ContentBytes)}
	id := b.authors[a].stamp(ev)
	b.emit(benchload.Event{EventInsertParams: store.EventInsertParams{CommunityID: community, Event: ev, Channel: channel},
		Deleted: deleted})
	return id
}

// root emits a top-level message of channel C and returns its node.
func (b *builder) root(at int64) threadState {
	id := b.message(b.communityID, b.channel, at, event.KindStreamMessage, event.Tags{{"h", b.channel}}, false)
	b.nodes = append(b.nodes, tnode{id: id, at: at, parent: -1, root: -1})
	n := int32(len(b.nodes) - 1)
	return threadState{node: n, lastDepth1: -1, lastDepth2: -1}
}

// reply emits the next reply of t at at.
func (b *builder) reply(t *threadState, at int64) int32 {
	depth := int8(1 + t.n%3)
	parent := t.node
	switch depth {
	case 2:
		parent = t.lastDepth1
	case 3:
		parent = t.lastDepth2
	}
	kind := event.KindStreamMessage
	if t.n%2 == 1 {
		kind = event.KindStreamMessage2
	}
	deleted := b.rng.IntN(100) < b.s.DeletedPct
	rootHex := hex.EncodeToString(b.nodes[t.node].id[:])
	tags := event.Tags{{"h", b.channel}, {"e", rootHex, "", "root"},
		{"e", hex.EncodeToString(b.nodes[parent].id[:]), "", "reply"}}
	id := b.message(b.communityID, b.channel, at, kind, tags, deleted)
	b.nodes = append(b.nodes, tnode{id: id, at: at, parent: parent, root: t.node, depth: depth, deleted: deleted})
	n := int32(len(b.nodes) - 1)
	p := &b.nodes[parent]
	p.last = max(p.last, at)
	if !deleted {
		p.replies++
		b.nodes[t.node].desc++
	} else {
		b.deleted++
	}
	switch depth {
	case 1:
		t.lastDepth1 = n
	case 2:
		t.lastDepth2 = n
	}
	t.n++
	return n
}

// generate emits channel C's events in created_at order, then the other
// communities' (whose ids it returns in others), and closes out. R's
// replies are PerSecond per second from start; the other replies are
// spread evenly over the same span, each to a random other root.
func (b *builder) generate(start, span int64, others [][2]string) (rootNode int32, replyNodes []int32) {
	defer close(b.out)
	s := b.s
	threads := make([]threadState, s.OtherRoots)
	for j := range threads { // the other roots: one a second before R
		threads[j] = b.root(start - 1 - int64(s.OtherRoots-j))
	}
	r := b.root(start - 1)
	replyNodes = make([]int32, 0, s.Replies)
	k, i := 0, 0
	for k < s.Replies || i < s.OtherReplies {
		rAt := start + int64(k/s.PerSecond)
		oAt := start + int64(i)*span/int64(max(s.OtherReplies, 1))
		if k < s.Replies && (i >= s.OtherReplies || rAt <= oAt) {
			replyNodes = append(replyNodes, b.reply(&r, rAt))
			k++
			continue
		}
		b.reply(&threads[b.rng.IntN(len(threads))], oAt)
		i++
	}
	for _, o := range others {
		for n := range s.CommunityEvents {
			at := start + int64(n)*span/int64(s.CommunityEvents)
			b.message(o[0], o[1], at, event.KindStreamMessage, event.Tags{{"h", o[1]}}, false)
		}
	}
	b.flush()
	return r.node, replyNodes
}

// loadFixture creates bench.local, its channel C and the other
// communities, loads every event (through the store's batch insert) and
// thread row of the fixture and runs VACUUM ANALYZE. The communities must not exist yet.
func loadFixture(ctx context.Context, pool *pgxpool.Pool, st *store.Store, s sizes, seed uint64, p *progress) (*fixture, error) {
	began := time.Now()
	fx := &fixture{authors: authors(authorCount)}
	owner := fx.authors[0].pubkey
	var others [][2]string
	for c := range s.Communities + 1 {
		host := benchHost
		if c > 0 {
			host = "other" + strconv.Itoa(c) + "." + benchHost
		}
		cm, err := st.CommunityAdd(ctx, store.CommunityAddParams{Host: host})
		if err != nil {
			return nil, fmt.Errorf("create community %s (the fixture loads into an empty database): %w", host, err)
		}
		ch := uuid.NewString()
		if err := store.New(pool).ChannelCreate(ctx, store.ChannelCreateParams{CommunityID: cm.ID, ID: ch, Name: "general",
			Type: "stream", Visibility: "open", CreatedBy: owner}); err != nil {
			return nil, fmt.Errorf("create channel in %s: %w", host, err)
		}
		if c == 0 {
			fx.communityID, fx.channel = cm.ID, ch
		} else {
			others = append(others, [2]string{cm.ID, ch})
		}
	}
	span := int64((s.Replies + s.PerSecond - 1) / s.PerSecond)
	fx.end = time.Now().Add(-time.Hour).Unix()
	start := fx.end - span + 1
	earliest := time.Unix(start-int64(s.OtherRoots)-2, 0)
	months := monthsBetween(earliest, time.Now()) + 1
	if err := pg.EnsurePartitions(ctx, pool, earliest, months); err != nil {
		return nil, fmt.Errorf("create partitions: %w", err)
	}
	out := make(chan []benchload.Event, 8)
	b := &builder{s: s, rng: rand.New(rand.NewPCG(seed, 0x7769)), authors: fx.authors,
		communityID: fx.communityID, channel: fx.channel, out: out, batch: make([]benchload.Event, 0, batchRows)}
	total := 1 + s.OtherRoots + s.Replies + s.OtherReplies + s.Communities*s.CommunityEvents
	p.logf("loading %d events (signing every one) into %s and %d other communities", total, benchHost, s.Communities)
	var rootNode int32
	var replyNodes []int32
	genDone := make(chan struct{})
	go func() {
		defer close(genDone)
		rootNode, replyNodes = b.generate(start, span, others)
	}()
	err := loadEvents(ctx, pool, st, fx.authors, out, total, p)
	<-genDone
	if err != nil {
		return nil, err
	}
	p.logf("loading %d thread_metadata rows", countRows(b.nodes))
	rows, err := copyThreads(ctx, pool, fx.communityID, fx.channel, b.nodes)
	if err != nil {
		return nil, err
	}
	p.logf("VACUUM ANALYZE")
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return nil, fmt.Errorf("vacuum analyze: %w", err)
	}
	rn := b.nodes[rootNode]
	fx.root = cursorOf(rn)
	for _, n := range replyNodes {
		fx.replies = append(fx.replies, cursorOf(b.nodes[n]))
	}
	newestFirst(fx.replies)
	fx.Events, fx.ThreadRows, fx.Deleted = b.events, rows, b.deleted
	fx.SpanSeconds = span
	fx.LoadSeconds = round3(time.Since(began).Seconds())
	p.logf("fixture loaded in %s", time.Since(began).Round(time.Second))
	return fx, nil
}

func cursorOf(n tnode) window.Cursor {
	return window.Cursor{CreatedAt: n.at, ID: hex.EncodeToString(n.id[:])}
}

// newestFirst sorts keys in the window order: created_at DESC, id ASC.
func newestFirst(keys []window.Cursor) {
	slices.SortFunc(keys, func(a, b window.Cursor) int {
		if c := cmp.Compare(b.CreatedAt, a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// monthsBetween counts the month boundaries from a to b.
func monthsBetween(a, b time.Time) int {
	a, b = a.UTC(), b.UTC()
	return (b.Year()-a.Year())*12 + int(b.Month()) - int(a.Month())
}

// countRows is the number of thread_metadata rows the nodes make: every
// reply, and every root that has at least one reply.
func countRows(nodes []tnode) int {
	n := 0
	for i := range nodes {
		if nodes[i].depth > 0 || nodes[i].last != 0 {
			n++
		}
	}
	return n
}
