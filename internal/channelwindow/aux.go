package channelwindow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
)

// The aux closure's bounds (§4.3): raw rows per page, pages per hop, and
// targets per statement (one containment parameter each).
const (
	auxPageSize     = 1000
	auxMaxPages     = 64
	auxTargetsBatch = 200
)

// The aux kinds of each hop (§2): hop 1 targets the delivered rows, hop 2
// the delivered hop-1 events.
var (
	hop1Kinds = []int{event.KindDeletion, event.KindReaction, event.KindDeleteEvent, event.KindMessageEdit}
	hop2Kinds = []int{event.KindDeletion, event.KindDeleteEvent}
)

// errCorruptAux is a live aux row that matched its target but cannot be
// reconstructed: the window fails with 500 (§12).
var errCorruptAux = errors.New("aux event cannot be reconstructed")

// closure is one window's aux closure as it is collected.
type closure struct {
	sc Scope
	q  pg.Querier
	// maxBytes, above 0, bounds the JSON of the aux kept (Config.
	// MaxBytes); bytes is what is kept so far. The aux event that
	// would go over it cuts the closure, as running out of pages does.
	maxBytes int
	bytes    int
	spent    bool
	// seen holds every id already in the answer: the delivered rows and
	// the aux kept so far, so each event appears once.
	seen map[string]struct{}
	out  []Item
	// cut is set when a hop ran out of pages or the closure out of bytes.
	cut bool
}

// auxClosure collects the aux of the delivered rows: hop 1 on their ids,
// hop 2 on the hop-1 events it kept, in discovery order.
func auxClosure(ctx context.Context, q pg.Querier, sc Scope, rows []row, maxBytes int) (items []Item, cut bool, err error) {
	targets := make([]string, 0, len(rows))
	for _, r := range rows {
		targets = append(targets, r.ev.ID)
	}
	return closeOver(ctx, q, sc, targets, maxBytes)
}

// closeOver is the two-hop closure over targets, which are in the answer
// already and so never returned again.
func closeOver(ctx context.Context, q pg.Querier, sc Scope, targets []string, maxBytes int) (items []Item, cut bool, err error) {
	c := &closure{sc: sc, q: q, maxBytes: maxBytes, seen: make(map[string]struct{}, len(targets))}
	for _, id := range targets {
		c.seen[id] = struct{}{}
	}
	hop1, err := c.hop(ctx, hop1Kinds, targets)
	if err != nil {
		return nil, false, fmt.Errorf("aux hop 1: %w", err)
	}
	if c.full() {
		return c.out, true, nil
	}
	if _, err := c.hop(ctx, hop2Kinds, hop1); err != nil {
		return nil, false, fmt.Errorf("aux hop 2: %w", err)
	}
	return c.out, c.cut, nil
}

// hop drains the aux of kinds targeting targets, batch by batch and page
// by page, at most auxMaxPages pages in all, and returns the ids it kept.
func (c *closure) hop(ctx context.Context, kinds []int, targets []string) ([]string, error) {
	var kept []string
	pages := 0
	for batch := range slices.Chunk(targets, auxTargetsBatch) {
		var pos *position
		for {
			if pages == auxMaxPages {
				c.cut = true
				return kept, nil
			}
			pages++
			page, stopped, err := queryAux(ctx, c.q, c.sc.CommunityID, kinds, batch, pos, c.left())
			if err != nil {
				return nil, err
			}
			more := len(page) > auxPageSize
			if more {
				page = page[:auxPageSize]
			}
			more = more || stopped // the next page starts after the last row read
			for i := range page {
				id, keep, err := c.admit(&page[i])
				if err != nil {
					return nil, err
				}
				if c.full() {
					return kept, nil
				}
				if keep {
					kept = append(kept, id)
				}
			}
			if !more {
				break
			}
			k := page[len(page)-1].position()
			pos = &k
		}
	}
	return kept, nil
}

// admit appends one matched aux row to the answer when the reader may see
// it: its channel accessible or none, visible to the reader, not already
// in the answer. It reports the row's id and whether it was kept.
func (c *closure) admit(s *stored) (string, bool, error) {
	ch := s.channelID()
	if ch != "" && !c.sc.Accessible(ch) {
		return "", false, nil
	}
	ev, ok := s.event()
	if !ok {
		return "", false, fmt.Errorf("%w: %s", errCorruptAux, ev.ID)
	}
	if !ev.VisibleTo(c.sc.Reader) {
		return "", false, nil
	}
	if _, dup := c.seen[ev.ID]; dup {
		return "", false, nil
	}
	if n := ev.JSONSize(); c.maxBytes > 0 {
		if c.bytes+n > c.maxBytes {
			c.cut, c.spent = true, true
			return "", false, nil
		}
		c.bytes += n
	}
	c.seen[ev.ID] = struct{}{}
	c.out = append(c.out, item(ev, ch))
	return ev.ID, true, nil
}

// full reports whether the closure ran out of bytes: nothing more is read.
func (c *closure) full() bool { return c.spent }

// left is the raw bytes the next aux page may read: what the byte budget
// has left, 0 without one.
func (c *closure) left() int {
	if c.maxBytes <= 0 {
		return 0
	}
	return max(c.maxBytes-c.bytes, 1)
}

// queryAux runs one aux page: live events of kinds in the community that
// target one of targets, newest first, strictly after pos, at most
// auxPageSize+1 rows (the last one only says another page follows). The
// containment tests let the GIN index find candidates; only the
// positional test decides, evaluated under CASE so tags that are not an
// array never reach jsonb_array_elements. maxBytes above 0 stops the scan
// after the row whose content and tags take the page over it: the page
// then ends early (stopped), and the next page starts after its last row.
func queryAux(ctx context.Context, q pg.Querier, communityID string, kinds []int, targets []string, pos *position, maxBytes int) (page []stored, stopped bool, err error) {
	args := []any{communityID, kinds, targets}
	ors := make([]string, len(targets))
	for i, t := range targets {
		j, err := json.Marshal([][]string{{"e", t}})
		if err != nil {
			return nil, false, fmt.Errorf("encode aux prefilter: %w", err)
		}
		args = append(args, string(j))
		ors[i] = "e.tags @> $" + strconv.Itoa(len(args)) + "::jsonb"
	}
	sql := "SELECT " + eventColumns + `
FROM events e
WHERE e.community_id = $1 AND e.deleted_at IS NULL AND e.kind = ANY($2::int[])
  AND (` + strings.Join(ors, " OR ") + `)
  AND CASE WHEN jsonb_typeof(e.tags) = 'array'
      THEN EXISTS (SELECT 1 FROM jsonb_array_elements(e.tags) tag
                   WHERE tag->>0 = 'e' AND tag->>1 = ANY($3::text[]))
      ELSE false END`
	if pos != nil {
		args = append(args, pos.at, pos.id)
		sql += "\n  AND " + after(len(args)-1)
	}
	sql += "\nORDER BY e.created_at DESC, e.id ASC\nLIMIT " + strconv.Itoa(auxPageSize+1)
	rs, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("select aux page: %w", err)
	}
	defer rs.Close()
	total := 0
	for rs.Next() {
		var s stored
		if err := rs.Scan(s.targets()...); err != nil {
			return nil, false, fmt.Errorf("scan aux row: %w", err)
		}
		page = append(page, s)
		if total += len(s.content) + len(s.tags); maxBytes > 0 && total > maxBytes {
			stopped = true
			break
		}
	}
	if err := rs.Err(); err != nil {
		return nil, false, fmt.Errorf("read aux page: %w", err)
	}
	return page, stopped, nil
}
