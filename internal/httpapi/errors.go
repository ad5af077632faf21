package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/read"
)

// statusOfCode is the one pipeline-result → HTTP status table
// (docs/PROTOCOL.md §1.2, §8.3, §8.6). Conflict is a 200 with accepted:false.
var statusOfCode = map[ingest.Code]int{
	ingest.Accepted:  http.StatusOK,
	ingest.Duplicate: http.StatusOK,
	ingest.Conflict:  http.StatusOK,
	ingest.Rejected:  http.StatusBadRequest,
	ingest.Forbidden: http.StatusForbidden,
	ingest.Internal:  http.StatusInternalServerError,
	// RateLimited: a quota of the sender (ingest/admission.go), with Retry-After.
	ingest.RateLimited: http.StatusTooManyRequests,
}

// statusOf returns the HTTP status of a pipeline result code; an unknown
// code is treated as an internal failure.
func statusOf(c ingest.Code) int {
	if s, ok := statusOfCode[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// readStatus is the one read-refusal → HTTP status table. bare is true
// where the bridge's body carries the reason without its NIP-01 prefix
// (wire compatibility: the WebSocket CLOSED text has one, the bridge's
// "too many explicit channels" does not).
var readStatus = map[read.Code]struct {
	status int
	bare   bool
}{
	read.CodeTooManyChannels:  {http.StatusBadRequest, true},
	read.CodeGated:            {http.StatusForbidden, false},
	read.CodeNotChannelMember: {http.StatusForbidden, false},
	read.CodeMixedSearch:      {http.StatusBadRequest, true},
	read.CodeSearchInCount:    {http.StatusBadRequest, true},
	read.CodeCountTooBroad:    {http.StatusBadRequest, false},
	read.CodeInvalidFilter:    {http.StatusBadRequest, false},
	read.CodeFilterCap:        {http.StatusBadRequest, false},
	read.CodeTooManyReads:     {http.StatusTooManyRequests, false},
	read.CodeReadTimeout:      {http.StatusServiceUnavailable, false},
	read.CodeReadTime:         {http.StatusTooManyRequests, false},
	// NIP-77 is WebSocket only: the bridge never opens these.
	read.CodeSearchInNeg:       {http.StatusBadRequest, false},
	read.CodeNegTooManyRecords: {http.StatusBadRequest, false},
}

// readFailure turns a read door error into the route's answer: a window's
// *read.StatusError as it is, a refusal through readStatus, anything else
// a 500 (logged by writeFailure).
func readFailure(err error) error {
	var se *read.StatusError
	if errors.As(err, &se) {
		return refuse(se.Status, se.Text)
	}
	var ref *read.Refusal
	if !errors.As(err, &ref) {
		return err
	}
	st, ok := readStatus[ref.Code]
	if !ok {
		return err
	}
	msg := ref.Reason
	if st.bare {
		msg = ref.Text()
	}
	ae := refuse(st.status, msg)
	ae.retryAfter = ref.RetryAfter
	if st.status == http.StatusTooManyRequests {
		ae.retryAfter = max(ae.retryAfter, 1)
	}
	return ae
}

// Fixed bridge messages of docs/PROTOCOL.md §2.5, §7.11, §8.
const (
	msgBodyTooLarge       = "request body too large"
	msgInternal           = "internal server error"
	msgBadXPubkey         = "invalid X-Pubkey hex"
	msgMembershipRequired = "relay_membership_required"
	msgMembershipDetail   = "You must be a relay member to access this relay"
	msgTooManyFilters     = "invalid filters: at most 10 filters per request"
)

// errorBody is every error body: {"error": ...}, with "message" only for
// the relay-membership refusal.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message,omitempty"`
}

// apiError is a client-facing refusal a route returns: its status and its
// exact error body.
type apiError struct {
	status int
	body   errorBody
	// retryAfter, when above 0, is sent as Retry-After (seconds).
	retryAfter int
}

func (e *apiError) Error() string { return e.body.Error }

// refuse builds the apiError of a status and an error message.
func refuse(status int, msg string) *apiError {
	return &apiError{status: status, body: errorBody{Error: msg}}
}

// writeJSON writes v as a JSON body with status, without HTML escaping so
// messages reach the client byte for byte.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	b := []byte(`{"error":"internal server error"}`)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
	} else {
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	writeRaw(w, status, b)
}

// writeRaw writes an already-encoded JSON body with status.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError writes {"error": msg} with status.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// writeFailure answers err: an *apiError with its own status and body, and
// anything else as a 500 with exactly {"error":"internal server error"},
// the details going to the log only.
func (s *Server) writeFailure(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
		}
		writeJSON(w, ae.status, ae.body)
		return
	}
	s.log.LogAttrs(r.Context(), slog.LevelError, "http bridge request failed",
		slog.String("route", r.URL.Path), slog.String("method", r.Method), slog.Any("err", err))
	writeError(w, http.StatusInternalServerError, msgInternal)
}
