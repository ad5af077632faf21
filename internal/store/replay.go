package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// NIP98Use records a NIP-98 event id as used in a community. fresh is false
// when the id was used before (a replay). Shared by every process. It is
// NIP98UseAll with one mark.
func (s *Store) NIP98Use(ctx context.Context, communityID, eventID string) (fresh bool, err error) {
	f, err := s.NIP98UseAll(ctx, []NIP98Mark{{CommunityID: communityID, EventID: eventID}})
	if err != nil {
		return false, err
	}
	return f[0], nil
}

// NIP98Mark is one NIP-98 event id to record as used in a community.
type NIP98Mark struct {
	CommunityID, EventID string
}

// NIP98UseAll records every mark as used in one statement and one commit
// and reports, mark by mark, whether it was fresh. When the same mark
// appears more than once, only its first occurrence is fresh. A mark whose
// id is not hex fails the whole call, as it fails NIP98Use.
func (s *Store) NIP98UseAll(ctx context.Context, marks []NIP98Mark) ([]bool, error) {
	cids := make([]string, len(marks))
	ids := make([][]byte, len(marks))
	for i, m := range marks {
		id, err := hex.DecodeString(m.EventID)
		if err != nil {
			return nil, fmt.Errorf("nip98 replay: bad id: %w", err)
		}
		cid, err := uuid.Parse(m.CommunityID)
		if err != nil {
			return nil, fmt.Errorf("nip98 replay: bad community id: %w", err)
		}
		cids[i], ids[i] = cid.String(), id
	}
	rows, err := s.q.Query(ctx, `INSERT INTO nip98_replay (community_id, event_id)
SELECT * FROM unnest($1::uuid[], $2::bytea[])
ON CONFLICT DO NOTHING
RETURNING community_id::text, encode(event_id, 'hex')`, cids, ids)
	if err != nil {
		return nil, fmt.Errorf("nip98 replay: %w", err)
	}
	defer rows.Close()
	inserted := map[NIP98Mark]bool{}
	for rows.Next() {
		var m NIP98Mark
		if err := rows.Scan(&m.CommunityID, &m.EventID); err != nil {
			return nil, fmt.Errorf("nip98 replay: %w", err)
		}
		inserted[m] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("nip98 replay: %w", err)
	}
	fresh := make([]bool, len(marks))
	for i := range marks {
		key := NIP98Mark{CommunityID: cids[i], EventID: hex.EncodeToString(ids[i])}
		if inserted[key] {
			fresh[i] = true
			delete(inserted, key) // a second occurrence in the batch is a replay
		}
	}
	return fresh, nil
}

// NIP98Purge deletes replay rows older than maxAge (180 s in production).
func (s *Store) NIP98Purge(ctx context.Context, maxAge time.Duration) (int64, error) {
	tag, err := s.q.Exec(ctx, `DELETE FROM nip98_replay WHERE seen_at < now() - make_interval(secs => $1)`, maxAge.Seconds())
	if err != nil {
		return 0, fmt.Errorf("purge nip98 replay: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ReplayBatcher records NIP-98 ids as used on behalf of every concurrent
// bridge call, a batch at a time (docs/OPERATIONS.md "Running a public
// relay"). Each call used to take a writer-pool connection and a commit of
// its own, so a burst of signed calls held as many connections as it had
// calls in flight and the group commit of ingest waited for one. The
// batcher holds at most one connection: the calls that arrive while a
// batch is written make the next one, written in one statement
// (NIP98UseAll).
type ReplayBatcher struct {
	st *Store
	// timeout bounds one batch's statement.
	timeout time.Duration

	mu      sync.Mutex
	pending []*replayWait
	running bool
}

// replayWait is one call waiting for its batch.
type replayWait struct {
	mark  NIP98Mark
	fresh bool
	err   error
	done  chan struct{}
}

// maxReplayBatch bounds one batch statement's marks.
const maxReplayBatch = 512

// NewReplayBatcher batches st's NIP98Use; timeout bounds each batch's
// statement (a batch that fails fails every call in it, which answers
// "NIP-98: replay check unavailable").
func NewReplayBatcher(st *Store, timeout time.Duration) *ReplayBatcher {
	return &ReplayBatcher{st: st, timeout: timeout}
}

// errReplayAbandoned is what a call gets when its context ends before its
// batch is written; the id may still be recorded as used.
var errReplayAbandoned = errors.New("nip98 replay: call ended before its batch was written")

// NIP98Use records eventID as used in communityID with the next batch and
// reports whether it was fresh, as Store.NIP98Use does.
func (b *ReplayBatcher) NIP98Use(ctx context.Context, communityID, eventID string) (bool, error) {
	if _, err := hex.DecodeString(eventID); err != nil {
		return false, fmt.Errorf("nip98 replay: bad id: %w", err)
	}
	w := &replayWait{mark: NIP98Mark{CommunityID: communityID, EventID: eventID}, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, w)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		go b.write()
	}
	select {
	case <-w.done:
		return w.fresh, w.err
	case <-ctx.Done():
		return false, fmt.Errorf("%w: %w", errReplayAbandoned, ctx.Err())
	}
}

// write writes batches until none is pending. One runs at a time.
func (b *ReplayBatcher) write() {
	for {
		b.mu.Lock()
		n := min(len(b.pending), maxReplayBatch)
		if n == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		if len(b.pending) == 0 {
			b.pending = nil
		}
		b.mu.Unlock()
		marks := make([]NIP98Mark, len(batch))
		for i, w := range batch {
			marks[i] = w.mark
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		fresh, err := b.st.NIP98UseAll(ctx, marks)
		cancel()
		for i, w := range batch {
			if err != nil {
				w.err = err
			} else {
				w.fresh = fresh[i]
			}
			close(w.done)
		}
	}
}
