// Package hot is the hot window: the newest stored events of each
// community, kept in the relay's memory as their wire JSON with lookup
// lists by kind, author and tag, so that a REQ for a recent page is
// answered without PostgreSQL (docs/ARCHITECTURE.md "Hot window").
//
// PostgreSQL stays the source of truth. The window only answers a filter
// when it can prove that it holds every match the answer needs; otherwise
// Query says so and the caller reads PostgreSQL as it would without it.
// What makes the proof hold:
//
//   - A community's window holds every live event of a window kind (any
//     kind that is not replaceable, addressable or ephemeral: rows that
//     only an insert adds and only a NIP-09 deletion or their expiry
//     remove) with created_at at or after its horizon. It is filled from
//     the committed stream that feeds live fan-out and warmed from
//     PostgreSQL.
//   - Anything it cannot follow exactly (an admin deletion, an ambiguous
//     commit, a write by another program) resets the community, or every
//     community, to cold: cold windows answer nothing until warmed again.
//   - A filter is answered only when it names kinds, all window kinds, and
//     either its newest limit matches lie at or after the horizon or its
//     since does.
package hot

import (
	"context"
	"hash/maphash"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/metrics"
)

// Entry is one stored event as the window keeps it.
type Entry struct {
	// Event is the decoded event; callers must not modify it.
	Event event.Event
	// Channel is the stored channel id, "" for a global event.
	Channel string
	// JSON is the event's NIP-01 object, as PostgreSQL's rows give it.
	JSON []byte
	// Expires is the unix time of its NIP-40 expiration, 0 for none.
	Expires int64
}

// cost is what an entry is charged against Config.Bytes: an estimate of
// the memory it holds, its JSON, the decoded copy of the same fields and
// the lookup lists' and maps' share.
func (e *Entry) cost() int64 { return 2*int64(len(e.JSON)) + 320 }

// NewEntry builds the Entry of a committed event; js may be nil, and is
// then encoded here.
func NewEntry(ev *event.Event, channel string, js []byte) *Entry {
	if js == nil {
		js = ev.AppendJSON(nil)
	}
	e := &Entry{Event: *ev, Channel: channel, JSON: js}
	if at, present, ok := ev.Expiration(); present && ok {
		e.Expires = at
	}
	return e
}

// IsWindowKind reports whether the window holds events of kind k: rows
// that only an insert adds and only a NIP-09 deletion or expiry removes.
func IsWindowKind(k int) bool {
	return !event.IsReplaceable(k) && !event.IsAddressable(k) && !event.IsEphemeral(k)
}

// WarmFunc reads the newest n live events of window kinds of a community
// from PostgreSQL, newest first (created_at descending, id ascending).
type WarmFunc func(ctx context.Context, community string, n int) ([]*Entry, error)

// Config sizes the window. Events at 0 turns it off.
type Config struct {
	// Events bounds one community's window in events
	// (BUZZ_HOT_WINDOW_EVENTS).
	Events int
	// Bytes bounds one community's window in estimated memory: twice its
	// JSON plus 320 bytes an event (BUZZ_HOT_WINDOW_MIB).
	Bytes int64
	// Communities bounds the communities with a window at once
	// (BUZZ_HOT_WINDOW_COMMUNITIES): warming one more resets the one
	// read least recently, at most once per EvictEvery.
	Communities int
	// EvictEvery spaces the warms that reset another community's window
	// to make room. A reader of more communities than Communities would
	// otherwise make every read a warm of up to Events rows. Default
	// DefaultEvictEvery.
	EvictEvery time.Duration
	// Warm reads a community's newest events; required when Events > 0.
	Warm WarmFunc
	// Older reads what the live events of window kinds of a community
	// created before before (unix seconds) carry: their e and p tag values
	// and their authors, looking at no more than maxRows events; complete
	// is false when it stopped there. A warm that leaves a horizon calls
	// it, so that the window can prove that an #e, #p or authors filter
	// has no match older than the horizon. Nil: it never can.
	Older func(ctx context.Context, community string, before int64, maxRows int) (o Older, complete bool, err error)
	// NextExpiry reads the earliest NIP-40 expiration (unix seconds) of
	// the community's stored events that has not passed, math.MaxInt64
	// when none: until then, and while nothing is committed, a search
	// page of the community stays what PostgreSQL would give (Watch).
	// Watch calls it in its caller's context, inside the caller's read
	// (a search's, which holds the read share). Nil: Watch never gives a
	// stamp.
	NextExpiry func(ctx context.Context, community string) (int64, error)
	// WarmTimeout bounds one warm read. Default 10 s.
	WarmTimeout time.Duration
	// Follow is set when other processes commit to the same communities
	// (REDIS_URL): it subscribes this process to every commit of the
	// community they make (the bus's window topic, fed to Committed) and
	// reports whether the subscription is confirmed; a warm reads
	// PostgreSQL only after it is. Unfollow undoes one Follow, when the
	// window goes cold. Nil with one process: it makes every commit.
	Follow   func(ctx context.Context, community string) bool
	Unfollow func(community string)
	// Barrier, set with Follow, returns once every event another process
	// acknowledged before the call has been given to Committed; a Query
	// waits for it before it answers, and reads PostgreSQL when it fails.
	Barrier func(ctx context.Context) error
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Window is every community's hot window. The zero of *Window (nil) is a
// window that is off: every method may be called on it.
type Window struct {
	cfg Config
	log *slog.Logger
	m   *metrics.Metrics

	mu    sync.Mutex
	comms map[string]*community
	// enabled is false while the process may miss writes it must follow
	// (SetEnabled): nothing warms, nothing is answered. linked is false
	// while the bus has a gap (SetLinked); true without a bus.
	enabled, linked atomic.Bool
	// epoch is bumped by every ResetAll, so a warm begun before it is
	// thrown away.
	epoch atomic.Uint64
	// events and bytes are the totals of every window, for the gauges.
	events, bytes atomic.Int64
	// lastEvict is when a warm last reset another window for room (unix
	// nanoseconds).
	lastEvict atomic.Int64
}

// DefaultEvictEvery is Config.EvictEvery's default: a warm that evicts
// reads up to Events rows, so at most one every 30 s.
const DefaultEvictEvery = 30 * time.Second

// New returns the window, or nil (off) when cfg.Events is 0. It starts
// disabled: its caller turns it on (SetEnabled) once it follows every
// commit.
func New(cfg Config) *Window {
	if cfg.Events <= 0 || cfg.Warm == nil {
		return nil
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WarmTimeout <= 0 {
		cfg.WarmTimeout = 10 * time.Second
	}
	if cfg.Bytes <= 0 {
		cfg.Bytes = math.MaxInt64
	}
	if cfg.Communities <= 0 {
		cfg.Communities = 1
	}
	if cfg.EvictEvery <= 0 {
		cfg.EvictEvery = DefaultEvictEvery
	}
	w := &Window{cfg: cfg, log: cfg.Logger.With(slog.String("component", "hot_window")), m: cfg.Metrics,
		comms: map[string]*community{}}
	w.linked.Store(true)
	return w
}

// state is a community window's state.
type state int

const (
	cold    state = iota // answers nothing; the next read starts a warm
	warming              // a warm read is running; stream changes queue
	ready                // answers what it can prove
)

// op is a stream change queued while a community warms.
type op struct {
	add *Entry
	// del is the id of a NIP-09 target and by its author.
	del, by string
}

// community is one community's window. Its lists hold items sorted by
// (created_at ascending, id descending): walked from the end they give the
// order of a REQ, created_at descending with ties by id ascending.
type community struct {
	mu    sync.RWMutex
	state state
	// gen is bumped at each reset; a warm that began under an older gen is
	// dropped.
	gen uint64
	// changes counts the commits given to Committed while the community
	// has a window, of any kind but ephemeral (Stamp).
	changes atomic.Uint64
	// nextExpiry is, while expiryKnown, the earliest NIP-40 expiration
	// (unix seconds) of the community's stored events that had not
	// passed when it was read (Config.NextExpiry), lowered by every
	// commit that carries an earlier one; math.MaxInt64 for none (Stamp).
	nextExpiry  int64
	expiryKnown bool
	// horizon: every live event of a window kind with created_at >=
	// horizon is held. math.MinInt64 when the window holds the whole
	// community.
	horizon int64
	all     list
	kinds   map[int]*list
	authors map[string]*list
	tags    map[tagKey]*list
	ids     map[string]*Entry
	bytes   int64
	pending []op
	// lastRead is when it was last queried (unix nanoseconds), for the
	// choice of which window to reset when too many are warm.
	lastRead atomic.Int64
	// heldUntil (unix nanoseconds): no warm starts before it (Hold).
	heldUntil atomic.Int64
	// id is the community id; followed is true between a Follow that
	// succeeded and its Unfollow.
	id       string
	followed bool
	// older holds a hash (olderKey) of every e and p tag value and every
	// author of the live events of window kinds older than the horizon,
	// while olderKnown: read by the warm (Config.Older), then added to by
	// every event that falls below the horizon, trimmed or committed late.
	// Deletions are not taken out: a value too many, or a collision, only
	// sends a filter to PostgreSQL. More than olderCap values and it is
	// dropped.
	older      map[uint64]struct{}
	olderKnown bool
	olderCap   int
}

// Older is what the events below a window's horizon carry (Config.Older):
// the values of their e and p tags and their authors, each once.
type Older struct {
	E, P, Authors []string
}

// authorName is the name of an author's olderKey; no tag has it.
const authorName = 0

// olderSeed seeds olderKey for the process.
var olderSeed = maphash.MakeSeed()

// olderKey is a value's key in community.older: a tag's name and value,
// or authorName and a pubkey.
func olderKey(name byte, v string) uint64 {
	return maphash.Comparable(olderSeed, tagKey{name: name, value: v})
}

// olderRows is how many events older than the horizon a warm reads for
// their values, and olderCap how many distinct values a window keeps, as
// multiples of Config.Events: past either, the filters that run out of
// candidates read PostgreSQL.
const (
	olderRows = 4
	olderCap  = 4
)

// tagKey is one indexed tag value: e, p, h (the stored channel, and h
// tags), d and t.
type tagKey struct {
	name  byte
	value string
}

// indexed are the tag names with lookup lists.
var indexed = [...]byte{'e', 'p', 'h', 'd', 't'}

func isIndexed(name string) bool {
	if len(name) != 1 {
		return false
	}
	for _, n := range indexed {
		if n == name[0] {
			return true
		}
	}
	return false
}

// list is a sorted run of entries; head is the first live index, so the
// oldest entries leave from the front without copying.
type list struct {
	items []*Entry
	head  int
}

func (l *list) len() int { return len(l.items) - l.head }

// less is the lists' order: created_at ascending, id descending.
func less(a, b *Entry) bool {
	if a.Event.CreatedAt != b.Event.CreatedAt {
		return a.Event.CreatedAt < b.Event.CreatedAt
	}
	return a.Event.ID > b.Event.ID
}

// insert puts e in order; a new event is usually the newest and appended.
func (l *list) insert(e *Entry) {
	n := len(l.items)
	if n == l.head || less(l.items[n-1], e) {
		l.items = append(l.items, e)
		return
	}
	i := l.head + sort.Search(n-l.head, func(i int) bool { return less(e, l.items[l.head+i]) })
	l.items = append(l.items, nil)
	copy(l.items[i+1:], l.items[i:])
	l.items[i] = e
}

// remove takes e out of the list.
func (l *list) remove(e *Entry) {
	n := len(l.items)
	i := l.head + sort.Search(n-l.head, func(i int) bool { return !less(l.items[l.head+i], e) })
	if i < n && l.items[i] == e {
		copy(l.items[i:], l.items[i+1:])
		l.items[n-1] = nil
		l.items = l.items[:n-1]
	}
}

// popFront drops the oldest entry, which must be e.
func (l *list) popFront(e *Entry) {
	if l.len() == 0 || l.items[l.head] != e {
		l.remove(e)
		return
	}
	l.items[l.head] = nil
	l.head++
	if l.head > 64 && l.head*2 > len(l.items) {
		l.items = append([]*Entry(nil), l.items[l.head:]...)
		l.head = 0
	}
}

// distinctKeys is every lookup list key of e once: its stored channel as
// an h value, and the first value of each indexed tag.
func distinctKeys(e *Entry) []tagKey {
	var keys []tagKey
	// A set once there are more than a few: an event may carry thousands
	// of tags, and a scan per tag would cost their square.
	var set map[tagKey]bool
	add := func(k tagKey) {
		if set == nil && len(keys) >= 16 {
			set = make(map[tagKey]bool, 2*len(keys))
			for _, o := range keys {
				set[o] = true
			}
		}
		if set != nil {
			if !set[k] {
				set[k] = true
				keys = append(keys, k)
			}
			return
		}
		for _, o := range keys {
			if o == k {
				return
			}
		}
		keys = append(keys, k)
	}
	if e.Channel != "" {
		add(tagKey{'h', e.Channel})
	}
	for _, t := range e.Event.Tags {
		if len(t) > 1 && isIndexed(t[0]) {
			add(tagKey{t[0][0], t[1]})
		}
	}
	return keys
}

func newCommunity(id string) *community {
	return &community{id: id, horizon: math.MinInt64, kinds: map[int]*list{}, authors: map[string]*list{},
		tags: map[tagKey]*list{}, ids: map[string]*Entry{}}
}

// clear empties the window (the caller holds c.mu) and returns what it
// held, for the totals.
func (c *community) clear() (events int, bytes int64) {
	events, bytes = c.all.len(), c.bytes
	c.all = list{}
	c.kinds, c.authors, c.tags = map[int]*list{}, map[string]*list{}, map[tagKey]*list{}
	c.ids = map[string]*Entry{}
	c.bytes, c.pending, c.horizon = 0, nil, math.MinInt64
	c.older, c.olderKnown = nil, false
	c.expiryKnown = false
	return events, bytes
}

// knowOlder starts older from o, what every event older than the horizon
// carries (the caller holds c.mu).
func (c *community) knowOlder(o Older, limit int) {
	c.older, c.olderKnown, c.olderCap = make(map[uint64]struct{}, len(o.E)+len(o.P)+len(o.Authors)), true, limit
	for _, v := range o.E {
		c.older[olderKey('e', v)] = struct{}{}
	}
	for _, v := range o.P {
		c.older[olderKey('p', v)] = struct{}{}
	}
	for _, v := range o.Authors {
		c.older[olderKey(authorName, v)] = struct{}{}
	}
	c.capOlder()
}

// belowHorizon records e, an event that is or has just gone below the
// horizon, in older (the caller holds c.mu).
func (c *community) belowHorizon(e *Entry) {
	if !c.olderKnown {
		return
	}
	c.older[olderKey(authorName, e.Event.PubKey)] = struct{}{}
	for _, t := range e.Event.Tags {
		if len(t) > 1 && (t[0] == "e" || t[0] == "p") {
			c.older[olderKey(t[0][0], t[1])] = struct{}{}
		}
	}
	c.capOlder()
}

func (c *community) capOlder() {
	if len(c.older) > c.olderCap {
		c.older, c.olderKnown = nil, false
	}
}

// noOlderMatch reports whether no event older than the horizon can match
// f: one of its authors, #e or #p constraints names only values that no
// such event carries (a match must meet every constraint).
func (c *community) noOlderMatch(f *event.Filter) bool {
	if !c.olderKnown {
		return false
	}
	absent := func(name byte, values []string) bool {
		if len(values) == 0 {
			return false
		}
		for _, v := range values {
			if _, ok := c.older[olderKey(name, v)]; ok {
				return false
			}
		}
		return true
	}
	return absent(authorName, f.Authors) || absent('e', f.Tags["e"]) || absent('p', f.Tags["p"])
}

// add inserts e (the caller holds c.mu) unless it is older than the
// horizon or already held.
func (c *community) add(e *Entry) bool {
	if e.Event.CreatedAt < c.horizon {
		c.belowHorizon(e)
		return false
	}
	if _, dup := c.ids[e.Event.ID]; dup {
		return false
	}
	c.ids[e.Event.ID] = e
	c.all.insert(e)
	listOf(c.kinds, e.Event.Kind).insert(e)
	listOf(c.authors, e.Event.PubKey).insert(e)
	for _, k := range distinctKeys(e) {
		listOf(c.tags, k).insert(e)
	}
	c.bytes += e.cost()
	return true
}

// drop takes e out of every list (the caller holds c.mu); front says it
// is the oldest held.
func (c *community) drop(e *Entry, front bool) {
	delete(c.ids, e.Event.ID)
	take := func(l *list) {
		if front {
			l.popFront(e)
		} else {
			l.remove(e)
		}
	}
	take(&c.all)
	dropFrom(c.kinds, e.Event.Kind, take)
	dropFrom(c.authors, e.Event.PubKey, take)
	for _, k := range distinctKeys(e) {
		dropFrom(c.tags, k, take)
	}
	c.bytes -= e.cost()
}

// trim evicts the oldest whole seconds until the window is within its
// bounds, raising the horizon past them; it returns what it evicted.
func (c *community) trim(maxEvents int, maxBytes int64) (events int, bytes int64) {
	for c.all.len() > maxEvents || (c.bytes > maxBytes && c.all.len() > 0) {
		second := c.all.items[c.all.head].Event.CreatedAt
		for c.all.len() > 0 && c.all.items[c.all.head].Event.CreatedAt == second {
			e := c.all.items[c.all.head]
			bytes += e.cost()
			events++
			c.drop(e, true)
			c.belowHorizon(e)
		}
		c.horizon = second + 1
	}
	return events, bytes
}

func listOf[K comparable](m map[K]*list, k K) *list {
	l := m[k]
	if l == nil {
		l = &list{}
		m[k] = l
	}
	return l
}

func dropFrom[K comparable](m map[K]*list, k K, take func(*list)) {
	if l := m[k]; l != nil {
		take(l)
		if l.len() == 0 {
			delete(m, k)
		}
	}
}
