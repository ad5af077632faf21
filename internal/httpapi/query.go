package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/read"
)

// parseFilters decodes the body of /query and /count: a JSON array of 1–10
// filters (spec 10 §8.4). Errors are 400 *apiErrors "invalid filters: …".
func parseFilters(body []byte) ([]event.Filter, error) {
	trimmed := bytes.TrimSpace(body)
	var raws []json.RawMessage
	if len(trimmed) == 0 || trimmed[0] != '[' || json.Unmarshal(trimmed, &raws) != nil {
		return nil, refuse(http.StatusBadRequest, "invalid filters: body must be a JSON array of filters")
	}
	switch {
	case len(raws) == 0:
		return nil, refuse(http.StatusBadRequest, "invalid filters: at least one filter is required")
	case len(raws) > maxFilters:
		return nil, refuse(http.StatusBadRequest, msgTooManyFilters)
	}
	filters := make([]event.Filter, len(raws))
	for i, raw := range raws {
		f, err := event.ParseFilter(raw)
		if err != nil {
			detail := err.Error()
			var pe *event.ParseError
			if errors.As(err, &pe) {
				detail = pe.Detail
			}
			return nil, refuse(http.StatusBadRequest, "invalid filters: "+detail)
		}
		filters[i] = f
	}
	return filters, nil
}

// query is POST /query (spec 10 §8.4): the filters go to the read door
// whole, and the rows come back as one JSON array. A request that carries
// read_state_snapshot is the read-state snapshot instead (readstate.go).
func (s *Server) query(ctx context.Context, rq *bridgeRequest) (any, error) {
	filters, err := parseFilters(rq.body)
	if err != nil {
		return nil, err
	}
	if read.WantsSnapshot(filters) {
		return s.readStateSnapshot(ctx, rq, filters)
	}
	rd, err := s.cfg.Reader.Open(ctx, read.Request{
		Scope:   read.Scope{CommunityID: rq.tenant.CommunityID, Reader: rq.pubkey},
		Surface: read.SurfaceQuery, Filters: filters, Log: s.log,
	})
	if err != nil {
		return nil, readFailure(err)
	}
	out := []byte{'['}
	err = rd.Rows(ctx, func(row read.Row) bool {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, row.JSON...)
		return true
	})
	if err != nil {
		return nil, readFailure(err)
	}
	return json.RawMessage(append(out, ']')), nil
}
