package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/buzz-relay/buzz/internal/read"
)

// countResponse is the 200 body of POST /count.
type countResponse struct {
	Count int64 `json:"count"`
}

// count is POST /count (spec 10 §8.5): the same gates as /query and the
// semantics of WebSocket COUNT (§7.8), the per-filter counts summed.
func (s *Server) count(ctx context.Context, rq *bridgeRequest) (any, error) {
	filters, err := parseFilters(rq.body)
	if err != nil {
		return nil, err
	}
	if err := checkFilters(rq.pubkey, filters); err != nil {
		return nil, err
	}
	for i := range filters {
		if filters[i].Search != nil {
			return nil, refuse(http.StatusBadRequest, msgSearchInCount)
		}
	}
	rs, err := s.resolveScope(ctx, rq, filters)
	if err != nil {
		return nil, err
	}
	var total int64
	for i := range filters {
		f, ok := rs.narrow(filters[i])
		if !ok || f.MatchesNothing() {
			continue // an inaccessible #h or kinds: [] counts 0; limit is ignored
		}
		n, err := s.cfg.Reader.Count(ctx, rs.sc, rs.acc, &f)
		if errors.Is(err, read.ErrCountTooBroad) {
			return nil, refuse(http.StatusBadRequest, msgCountTooBroad)
		}
		if err != nil {
			return nil, fmt.Errorf("count filter %d: %w", i, err)
		}
		total += n
	}
	return countResponse{Count: total}, nil
}
