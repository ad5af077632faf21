package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/read"
)

// snapshotStatus is the read-state snapshot's failure → HTTP status table.
var snapshotStatus = map[read.SnapshotCode]int{
	read.SnapshotInvalid:     http.StatusBadRequest,
	read.SnapshotTooLarge:    http.StatusRequestEntityTooLarge,
	read.SnapshotUnavailable: http.StatusServiceUnavailable,
}

// readStateSnapshot is POST /query with a read_state_snapshot filter: the
// reader's complete read state in one answer,
//
//	{"read_state_snapshot":1,"complete":true,"pubkey":"<hex>","snapshot_id":"<hex>","events":[…]}
//
// (read.Snapshot documents snapshot_id). Every failure is an error body:
// 400 for any other shape, 413 over the limits, 503 when storage failed or
// a row is corrupt. A 200 is always the whole set; complete is always
// true, so a client that reads it never has to guess.
func (s *Server) readStateSnapshot(ctx context.Context, rq *bridgeRequest, filters []event.Filter) (any, error) {
	snap, err := s.cfg.Reader.ReadStateSnapshot(ctx,
		read.Scope{CommunityID: rq.tenant.CommunityID, Reader: rq.pubkey}, rq.shareKey(), filters)
	if err != nil {
		var se *read.SnapshotError
		if !errors.As(err, &se) {
			return nil, err
		}
		if se.Code == read.SnapshotUnavailable {
			s.log.LogAttrs(ctx, slog.LevelError, "read-state snapshot failed",
				slog.String("community", rq.tenant.Host), slog.String("pubkey", rq.pubkey), slog.Any("err", se.Err))
		}
		st, ok := snapshotStatus[se.Code]
		if !ok {
			return nil, err
		}
		return nil, refuse(st, se.Reason)
	}
	out := make([]byte, 0, len(snap.EventsJSON)+256)
	out = append(out, `{"read_state_snapshot":`...)
	out = strconv.AppendInt(out, read.SnapshotVersion, 10)
	out = append(out, `,"complete":true,"pubkey":`...)
	out = event.AppendString(out, snap.Pubkey)
	out = append(out, `,"snapshot_id":`...)
	out = event.AppendString(out, snap.ID)
	out = append(out, `,"events":`...)
	out = append(out, snap.EventsJSON...)
	return json.RawMessage(append(out, '}')), nil
}
