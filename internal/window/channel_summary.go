package window

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// maxParticipants is how many reply authors a summary names
// (docs/NIP-CW.md §3.4).
const maxParticipants = 10

// summary is one thread summary before it is signed: the root's
// thread_metadata counters and its latest reply authors.
type summary struct {
	root                        string
	replyCount, descendantCount int
	lastReplyAt                 *int64
	participants                []string
}

// summaryContent is the content of a 39005. Key order is not part of the
// contract.
type summaryContent struct {
	ReplyCount      int      `json:"reply_count"`
	DescendantCount int      `json:"descendant_count"`
	LastReplyAt     *int64   `json:"last_reply_at"`
	Participants    []string `json:"participants"`
}

// fillParticipants sets the participants of every summary, with one
// statement for all of them.
func fillParticipants(ctx context.Context, q pg.Querier, communityID string, sums []summary) error {
	if len(sums) == 0 {
		return nil
	}
	roots := make([][]byte, len(sums))
	at := make(map[string]int, len(sums))
	for i, s := range sums {
		id, err := hex.DecodeString(s.root)
		if err != nil {
			return fmt.Errorf("decode summary root: %w", err)
		}
		roots[i] = id
		at[s.root] = i
		sums[i].participants = []string{}
	}
	ps, err := store.New(q).WindowThreadParticipants(ctx, communityID, roots, maxParticipants)
	if err != nil {
		return err
	}
	for _, p := range ps {
		i := at[hex.EncodeToString(p.Root)]
		sums[i].participants = append(sums[i].participants, hex.EncodeToString(p.PubKey))
	}
	return nil
}

// rowSummaries are the summaries of the delivered rows that have replies
// (reply_count > 0), in row order.
func rowSummaries(ctx context.Context, q pg.Querier, communityID string, rows []row) ([]summary, error) {
	var sums []summary
	for _, r := range rows {
		if r.replyCount > 0 {
			sums = append(sums, summary{root: r.ev.ID, replyCount: r.replyCount,
				descendantCount: r.descendantCount, lastReplyAt: r.lastReplyAt})
		}
	}
	if err := fillParticipants(ctx, q, communityID, sums); err != nil {
		return nil, err
	}
	return sums, nil
}

// signSummary signs s as a 39005 of channel: tags exactly e, d and h.
func (e *Engine) signSummary(channel string, s summary, now int64) (Item, error) {
	content, err := json.Marshal(summaryContent{ReplyCount: s.replyCount, DescendantCount: s.descendantCount,
		LastReplyAt: s.lastReplyAt, Participants: s.participants})
	if err != nil {
		return Item{}, fmt.Errorf("encode summary of %s: %w", s.root, err)
	}
	return e.overlay(kindThreadSummary, [][]string{{"e", s.root}, {"d", s.root}, {"h", channel}}, string(content), now)
}
