package threadwindow

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/buzz-relay/buzz/internal/pg"
)

// Shape of the aux closure (§5.5).
const (
	auxPageRows     = 1000
	auxBatchTargets = 200
)

// The aux kinds of §2: hop 1 targets the root and the delivered replies,
// hop 2 the events met in hop 1.
var (
	hop1Kinds = []int32{5, 7, 9005, 40003}
	hop2Kinds = []int32{5, 9005}
)

// auxRow is one row of an aux page scan.
type auxRow struct {
	key       Cursor
	tombstone bool
	payload   int64
}

// closure is §5.5 from the hop-1 targets: hop 1 over them, hop 2 over
// every raw id hop 1 met (deleted ones included), each aux event kept
// once, in discovery order.
func (w *window) closure(ctx context.Context, q pg.Querier, targets []string) ([]Item, error) {
	c := auxRun{w: w, seen: map[string]bool{}}
	raw, err := c.hop(ctx, q, hop1Kinds, targets)
	if err != nil {
		return nil, err
	}
	slices.Sort(raw)
	if _, err := c.hop(ctx, q, hop2Kinds, slices.Compact(raw)); err != nil {
		return nil, err
	}
	return c.out, nil
}

// auxRun is one run of a window's closure: what it has kept so far.
type auxRun struct {
	w    *window
	seen map[string]bool
	out  []Item
}

// hop drains the pages of every batch of targets for kinds and returns
// the raw ids of the rows it retained.
func (c *auxRun) hop(ctx context.Context, q pg.Querier, kinds []int32, targets []string) ([]string, error) {
	var raw []string
	for batch := range slices.Chunk(targets, auxBatchTargets) {
		var pos *Cursor
		for {
			retained, more, err := c.page(ctx, q, kinds, batch, pos)
			if err != nil {
				return nil, err
			}
			for _, r := range retained {
				raw = append(raw, r.key.ID)
			}
			if !more {
				break
			}
			next := retained[len(retained)-1].key
			if pos != nil && !after(next, *pos) {
				return nil, unavailable(msgAuxStuck)
			}
			pos = &next
		}
	}
	return raw, nil
}

// after reports whether a comes strictly after b in the order
// created_at DESC, id ASC.
func after(a, b Cursor) bool {
	return a.CreatedAt < b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.ID > b.ID)
}

// page is one aux page: one query charged before it runs; every row, the
// probe and deleted ones included, charged before the live retained rows
// are loaded by primary key and kept when they pass the gates. more says
// a probe row followed auxPageRows retained ones.
func (c *auxRun) page(ctx context.Context, q pg.Querier, kinds []int32, targets []string, pos *Cursor) (retained []auxRow, more bool, err error) {
	b := c.w.b
	if err := b.spend.page(); err != nil {
		return nil, false, err
	}
	rows, err := c.scan(ctx, q, kinds, targets, pos)
	if err != nil {
		return nil, false, err
	}
	for _, r := range rows {
		if err := b.spend.row(r.payload); err != nil {
			return nil, false, err
		}
	}
	if len(rows) > auxPageRows {
		rows, more = rows[:auxPageRows], true
	}
	var live []Cursor
	for _, r := range rows {
		if !r.tombstone {
			live = append(live, r.key)
		}
	}
	loaded, err := load(ctx, q, b.communityID, live)
	if err != nil {
		return nil, false, fmt.Errorf("load aux: %w", err)
	}
	for _, k := range live {
		s, ok := loaded[k.ID]
		if !ok {
			s.bad = "row gone at load"
		}
		if s.bad != "" {
			return nil, false, corrupt(fmt.Errorf("aux event %s is not reconstructable: %s", k.ID, s.bad))
		}
		if c.seen[k.ID] || !c.visible(&s.item) {
			continue
		}
		if err := b.spend.respond(len(s.item.JSON) + 1); err != nil {
			return nil, false, err
		}
		c.seen[k.ID] = true
		c.out = append(c.out, s.item)
	}
	return rows, more, nil
}

// visible is the read gate of an aux event: its channel is accessible, or
// it is a channel-less deletion, and the reader may see it.
func (c *auxRun) visible(it *Item) bool {
	b := c.w.b
	if it.Channel == "" {
		if it.Event.Kind != 5 && it.Event.Kind != 9005 {
			return false
		}
	} else if !b.a.has(it.Channel) {
		return false
	}
	return it.Event.VisibleTo(b.reader)
}

// scan runs the sizes-only statement of one aux page.
func (c *auxRun) scan(ctx context.Context, q pg.Querier, kinds []int32, targets []string, pos *Cursor) ([]auxRow, error) {
	b := c.w.b
	sql, args := auxScanStatement(b.communityID, b.accessibleList, kinds, targets, pos)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("scan aux: %w", err)
	}
	defer rows.Close()
	var out []auxRow
	for rows.Next() {
		var (
			id []byte
			at time.Time
			r  auxRow
		)
		// kind and channel_id are gated again after the load.
		if err := rows.Scan(&id, &at, nil, nil, &r.tombstone, &r.payload); err != nil {
			return nil, fmt.Errorf("scan aux: %w", err)
		}
		r.key = Cursor{CreatedAt: at.Unix(), ID: hex.EncodeToString(id)}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("scan aux: %w", err)
	}
	return out, nil
}
