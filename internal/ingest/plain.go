package ingest

import "context"

// plainFamily is every stored kind no other family claims (1, 1059, …):
// nothing to authorize beyond the generic steps, and the event is written
// by the one-statement hot path.
type plainFamily struct{ byTag }

func (plainFamily) authorize(_ context.Context, _ *Pipeline, _ *Request, rt route) (change, error) {
	return plainChange{channel: rt.channel}, nil
}

// plainChange is the event row, its event_mentions and its audit intent in
// one statement with no transaction around it. Other families return it
// when their event needs nothing else (a top-level thread message, an
// edit, a vote).
type plainChange struct{ channel string }

func (plainChange) oneStatement() {}

func (c plainChange) apply(ctx context.Context, w writer) (outcome, error) {
	if err := w.insertEvent(ctx, c.channel, nil); err != nil {
		return outcome{}, err
	}
	return outcome{channel: c.channel}, nil
}
