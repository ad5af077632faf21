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

// splitFilters decodes the body of /query and /count into its 1–10 raw
// filters (docs/PROTOCOL.md §8.4). Errors are 400 *apiErrors "invalid filters: …".
func splitFilters(body []byte) ([]json.RawMessage, error) {
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
	return raws, nil
}

// parseFilters decodes the body of /query and /count: a JSON array of 1–10
// filters (docs/PROTOCOL.md §8.4). Errors are 400 *apiErrors "invalid filters: …".
func parseFilters(body []byte) ([]event.Filter, error) {
	raws, err := splitFilters(body)
	if err != nil {
		return nil, err
	}
	return parseRawFilters(raws)
}

// parseRawFilters parses each raw filter.
func parseRawFilters(raws []json.RawMessage) ([]event.Filter, error) {
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

// query is POST /query (docs/PROTOCOL.md §8.4): the filters go to the read door
// whole, and the rows come back as one JSON array. The NIP-CW
// thread-window scan runs before anything else parses the filters
// (docs/NIP-CW.md §1 step 3). A request that carries read_state_snapshot
// is the read-state snapshot instead (readstate.go).
func (s *Server) query(ctx context.Context, rq *bridgeRequest) (any, error) {
	raws, err := splitFilters(rq.body)
	if err != nil {
		return nil, err
	}
	threads, err := s.cfg.Reader.ScanThreadWindows(raws)
	if err != nil {
		return nil, readFailure(err)
	}
	filters, err := parseRawFilters(raws)
	if err != nil {
		return nil, err
	}
	if read.WantsSnapshot(filters) {
		return s.readStateSnapshot(ctx, rq, filters)
	}
	rd, err := s.cfg.Reader.Open(ctx, read.Request{
		Scope:   read.Scope{CommunityID: rq.tenant.CommunityID, Reader: rq.pubkey},
		Surface: read.SurfaceQuery, Filters: filters, Log: s.log,
		Host: rq.tenant.Host, Threads: threads, Conn: rq.shareKey(),
	})
	if err != nil {
		return nil, readFailure(err)
	}
	defer rd.Close()
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
