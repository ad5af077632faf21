package window

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// The aux closure of every window (docs/NIP-CW.md §3.3, §5.3, §6): hop 1
// reads the events of hop1Kinds that target the page's targets, hop 2 the
// events of hop2Kinds that target hop 1's. Both modes run the one
// statement (store.WindowAuxPage) and the one walk (closeOver); they differ only
// in their auxRules and their budget.

// The closure's shape: rows per page (and one more that only says another
// page follows), and targets per statement (one containment parameter
// each).
const (
	auxPageRows     = 1000
	auxBatchTargets = 200
)

// The aux kinds of each hop (docs/NIP-CW.md §3.3, §5.3).
var (
	hop1Kinds = []int{event.KindDeletion, event.KindReaction, event.KindDeleteEvent, event.KindMessageEdit}
	hop2Kinds = []int{event.KindDeletion, event.KindDeleteEvent}
)

// errCorruptAux is a live aux row that matched its target but cannot be
// reconstructed: the window fails with 500 (docs/NIP-CW.md §5.7).
var errCorruptAux = errors.New("aux event cannot be reconstructed")

// msgAuxStuck is the 503 of an aux scan whose next page would not start
// after the last (docs/NIP-CW.md §5.7).
const msgAuxStuck = "thread auxiliary scan did not advance"

// auxRules are what a mode's closure reads and keeps.
type auxRules struct {
	// reader is the authenticated pubkey: an event must be visible to it.
	reader string
	// channels, when not nil, restricts the scan to events of these
	// channels and the channel-less kinds below (thread mode reads its own
	// accessible set); nil scans every channel.
	channels []string
	// accessible reports whether the reader may read a channel; it gates
	// every event with a channel.
	accessible func(channel string) bool
	// channelless are the kinds kept without a channel.
	channelless []int
	// tombstones scans deleted events too (thread mode): they are charged
	// like any row and never returned, and hop 2 targets every id hop 1
	// met. Without it (channel mode) deleted events are not read and hop
	// 2 targets the events hop 1 kept.
	tombstones bool
}

// channelAux are channel mode's rules (docs/NIP-CW.md §3.3): every
// channel is scanned and accessible decides; a channel-less aux event is
// kept whatever its kind.
func channelAux(sc Scope) auxRules {
	return auxRules{reader: sc.Reader, accessible: sc.Accessible, channelless: hop1Kinds}
}

// auxRow is one row of an aux page scan: its position, what the gates
// need before loading, and its size.
type auxRow struct {
	pos       position
	kind      int
	channel   *string
	tombstone bool
	payload   int64
}

// closure is one run of a window's aux closure as it is collected.
type closure struct {
	q           pg.Querier
	communityID string
	rules       auxRules
	spend       *budget
	// seen holds every id already in the answer: the targets and the aux
	// kept so far, so each event appears once.
	seen map[string]struct{}
	out  []Item
	// kept are the ids the current hop kept, raw every id it met.
	kept, raw []string
	// cut is set when a hop ran out of pages or the closure out of bytes.
	cut bool
}

// closeOver is the two-hop closure over targets, which are in the answer
// already and so never returned again: hop 1 on targets, hop 2 on what
// hop 1 kept (or met, with tombstones), each aux event kept once, in
// discovery order. cut reports a closure that a cutting budget stopped
// short; a failing budget's error is returned as it is.
func closeOver(ctx context.Context, q pg.Querier, communityID string, rules auxRules, spend *budget, targets []string) (items []Item, cut bool, err error) {
	c := &closure{q: q, communityID: communityID, rules: rules, spend: spend, seen: make(map[string]struct{}, len(targets))}
	for _, id := range targets {
		c.seen[id] = struct{}{}
	}
	if err := c.hop(ctx, hop1Kinds, targets); errors.Is(err, errSpent) {
		return c.out, true, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("aux hop 1: %w", err)
	}
	next := c.kept
	if rules.tombstones {
		slices.Sort(c.raw)
		next = slices.Compact(c.raw)
	}
	if err := c.hop(ctx, hop2Kinds, next); errors.Is(err, errSpent) {
		return c.out, true, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("aux hop 2: %w", err)
	}
	return c.out, c.cut, nil
}

// hop drains the aux of kinds targeting targets, batch by batch and page
// by page, into c.kept and c.raw.
func (c *closure) hop(ctx context.Context, kinds []int, targets []string) error {
	c.kept, c.raw = nil, nil
	c.spend.hop()
	for batch := range slices.Chunk(targets, auxBatchTargets) {
		var pos *position
		for {
			rows, more, err := c.page(ctx, kinds, batch, pos)
			if errors.Is(err, errHopCut) {
				c.cut = true
				return nil
			}
			if err != nil {
				return err
			}
			if !more {
				break
			}
			next := rows[len(rows)-1].pos
			if pos != nil && !next.after(*pos) {
				return unavailable(msgAuxStuck)
			}
			pos = &next
		}
	}
	return nil
}

// page is one aux page: read, then its live rows loaded by primary key
// and kept when they pass the gates. It returns the page's rows without
// the probe; more says another page follows.
func (c *closure) page(ctx context.Context, kinds []int, targets []string, pos *position) (rows []auxRow, more bool, err error) {
	if rows, more, err = c.read(ctx, kinds, targets, pos); err != nil {
		return nil, false, err
	}
	if err := c.keepLive(ctx, rows); err != nil {
		return nil, false, err
	}
	return rows, more, nil
}

// read charges one aux page before it runs, scans it, and charges every
// row it scanned, the probe and deleted ones included. A cutting budget
// reads no further than the bytes it has left: the page ends after the
// row that takes it over them, and the next page starts after that row.
// It returns the page's rows without the probe; more says another page
// follows.
func (c *closure) read(ctx context.Context, kinds []int, targets []string, pos *position) (rows []auxRow, more bool, err error) {
	if err := c.spend.page(); err != nil {
		return nil, false, err
	}
	if rows, err = c.scan(ctx, kinds, targets, pos); err != nil {
		return nil, false, err
	}
	left, total, stopped := c.spend.left(), int64(0), false
	for i := range rows {
		if err := c.spend.row(rows[i].payload); err != nil {
			return nil, false, err
		}
		if total += rows[i].payload; left > 0 && total > left {
			rows, stopped = rows[:i+1], true
			break
		}
	}
	if len(rows) > auxPageRows {
		rows, more = rows[:auxPageRows], true
	}
	return rows, more || stopped, nil
}

// keepLive records the ids of a page's rows, loads the live ones and
// admits them in page order.
func (c *closure) keepLive(ctx context.Context, rows []auxRow) error {
	var live []position
	for i := range rows {
		c.raw = append(c.raw, hex.EncodeToString(rows[i].pos.id))
		if !rows[i].tombstone {
			live = append(live, rows[i].pos)
		}
	}
	loaded, err := load(ctx, c.q, c.communityID, live)
	if err != nil {
		return fmt.Errorf("load aux: %w", err)
	}
	for i := range rows {
		if !rows[i].tombstone {
			if err := c.admit(&rows[i], loaded[hex.EncodeToString(rows[i].pos.id)]); err != nil {
				return err
			}
		}
	}
	return nil
}

// admit keeps one live aux row when the reader may see it: its channel
// accessible (or it is channel-less of a kind kept so), reconstructable
// (else the window fails), visible to the reader and not already in the
// answer. s is the loaded row, nil when it is gone.
func (c *closure) admit(r *auxRow, s *stored) error {
	if r.channel == nil {
		if !slices.Contains(c.rules.channelless, r.kind) {
			return nil
		}
	} else if !c.rules.accessible(*r.channel) {
		return nil
	}
	id := hex.EncodeToString(r.pos.id)
	if s == nil {
		return fmt.Errorf("%w: %s: row gone at load", errCorruptAux, id)
	}
	ev, bad := s.event()
	if bad != "" {
		return fmt.Errorf("%w: %s: %s", errCorruptAux, id, bad)
	}
	if !ev.VisibleTo(c.rules.reader) {
		return nil
	}
	if _, dup := c.seen[id]; dup {
		return nil
	}
	it := item(ev, s.channelID())
	if err := c.spend.keep(it.JSON); err != nil {
		return err
	}
	c.seen[id] = struct{}{}
	c.out = append(c.out, it)
	c.kept = append(c.kept, id)
	return nil
}

// scan runs one aux page's statement.
func (c *closure) scan(ctx context.Context, kinds []int, targets []string, pos *position) ([]auxRow, error) {
	rows, err := store.New(c.q).WindowAuxPage(ctx, store.WindowAuxParams{CommunityID: c.communityID, Kinds: kinds,
		Tombstones: c.rules.tombstones, Channelless: c.rules.channelless, Channels: c.rules.channels,
		Targets: targets, After: keyOf(pos), Limit: auxPageRows + 1})
	if err != nil {
		return nil, err
	}
	out := make([]auxRow, len(rows))
	for i, r := range rows {
		out[i] = auxRow{pos: position{at: r.Key.At, id: r.Key.ID}, kind: r.Kind, channel: r.Channel,
			tombstone: r.Tombstone, payload: r.Payload}
	}
	return out, nil
}
