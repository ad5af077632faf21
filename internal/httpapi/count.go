package httpapi

import (
	"context"

	"github.com/buzz-relay/buzz/internal/read"
)

// countResponse is the 200 body of POST /count.
type countResponse struct {
	Count int64 `json:"count"`
}

// count is POST /count (docs/PROTOCOL.md §8.5): the semantics of WebSocket COUNT
// (docs/PROTOCOL.md §7.8) through the read door, the per-filter counts summed.
func (s *Server) count(ctx context.Context, rq *bridgeRequest) (any, error) {
	filters, err := parseFilters(rq.body)
	if err != nil {
		return nil, err
	}
	rd, err := s.cfg.Reader.Open(ctx, read.Request{
		Scope:   read.Scope{CommunityID: rq.tenant.CommunityID, Reader: rq.pubkey},
		Surface: read.SurfaceCountHTTP, Filters: filters, Log: s.log, Conn: rq.shareKey(),
	})
	if err != nil {
		return nil, readFailure(err)
	}
	defer rd.Close()
	n, err := rd.Count(ctx)
	if err != nil {
		return nil, readFailure(err)
	}
	return countResponse{Count: n}, nil
}
