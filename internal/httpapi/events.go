package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// eventsResponse is the 200 body of POST /events (docs/PROTOCOL.md §8.3).
type eventsResponse struct {
	EventID  string `json:"event_id"`
	Accepted bool   `json:"accepted"`
	Message  string `json:"message"`
}

// eventsBody is the body limit of POST /events: twice the largest event,
// room for a client's longer escaping of the same event; the event's own
// size is then judged by the pipeline, with the same text on both doors.
// Without an event limit it is MaxBodyBytes.
func (s *Server) eventsBody() bodyLimit {
	maximum := s.cfg.Settings.Bytes.MaxEventBytes
	if maximum <= 0 {
		return anyBody
	}
	return bodyLimit{max: 2 * int64(maximum), tooLarge: func(n int64) *apiError {
		return refuse(http.StatusRequestEntityTooLarge, wire.EventTooLarge(int(n), maximum))
	}}
}

// events is POST /events: one event, submitted to the ingest pipeline with
// the NIP-98 signer as its author.
func (s *Server) events(ctx context.Context, rq *bridgeRequest) (any, error) {
	ev, err := event.Parse(rq.body)
	if err != nil {
		detail := err.Error()
		var pe *event.ParseError
		if errors.As(err, &pe) {
			detail = pe.Detail
		}
		return nil, refuse(http.StatusBadRequest, "invalid event JSON: "+detail)
	}
	res := s.cfg.Submitter.Submit(ctx, ingest.Request{
		Tenant: rq.tenant,
		Author: rq.pubkey,
		Source: ingest.SourceHTTP,
		Event:  ev,
	})
	if res.After != nil {
		res.After() // evictions of revoked subscriptions; they concern other connections
	}
	switch status := statusOf(res.Code); status {
	case http.StatusOK:
		msg := res.Message
		switch {
		case res.Code == ingest.Accepted:
			msg = ""
		case res.Code == ingest.Duplicate && msg == "":
			msg = wire.MsgDuplicate
		}
		return eventsResponse{EventID: ev.ID, Accepted: res.OK(), Message: msg}, nil
	case http.StatusInternalServerError:
		// The pipeline has logged the cause; the client sees only the fixed body.
		return nil, fmt.Errorf("submit event %s: pipeline answered %q", ev.ID, res.Message)
	default:
		ae := refuse(status, res.Message)
		ae.retryAfter = res.RetryAfter
		return nil, ae
	}
}
