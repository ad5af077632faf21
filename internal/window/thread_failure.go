package window

import (
	"context"
	"errors"
	"net/http"

	"github.com/buzz-relay/buzz/internal/pg"
)

// The 503 and 500 texts of docs/NIP-CW.md §5.3, docs/NIP-CW.md §5.7 and
// docs/NIP-CW.md §8.
const (
	msgAuthChanged    = "thread authorization changed; retry query"
	msgRowAuthChanged = "thread row authorization changed during selection"
	msgQueryBudget    = "thread window query budget exceeded; reduce window work before retrying"
	msgRawRowBudget   = "thread window raw row budget exceeded; reduce window work before retrying"
	msgPayloadBudget  = "thread window payload byte budget exceeded; reduce window work before retrying"
	msgResponseBudget = "thread window exceeds response byte budget"
	msgDBTimeout      = "thread database timeout; retry window"
	msgDeadline       = "thread window deadline exceeded"
)

// Labels of buzz_thread_window_budget_exhausted_total (docs/OPERATIONS.md).
const (
	budgetQuery    = "query"
	budgetRawRow   = "raw_row"
	budgetPayload  = "payload_byte"
	budgetResponse = "response_byte"
	budgetDeadline = "deadline"
	budgetTimeout  = "db_timeout"
)

// failure is a batch that ends without an answer, on its way to an *Error:
// the status and text, the budget label it counts under ("" for none),
// and the cause for the log (never for the client).
type failure struct {
	status int
	text   string
	budget string
	// authChanged marks the A ≠ A' failure
	// (buzz_thread_window_authorization_changed_total).
	authChanged bool
	cause       error
}

func (f *failure) Error() string {
	if f.cause != nil {
		return f.text + ": " + f.cause.Error()
	}
	return f.text
}

func (f *failure) Unwrap() error { return f.cause }

func unavailable(text string) *failure {
	return &failure{status: http.StatusServiceUnavailable, text: text}
}

func exhausted(budget, text string) *failure {
	return &failure{status: http.StatusServiceUnavailable, text: text, budget: budget}
}

// corrupt is the 500 of a live aux row that cannot be reconstructed.
func corrupt(cause error) *failure {
	return &failure{status: http.StatusInternalServerError, text: msgInternal, cause: cause}
}

// isFailure reports whether err is a decided failure (a budget, a gate, a
// corrupt row), which a replica doubt must not turn into a retry.
func isFailure(err error) bool {
	var f *failure
	return errors.As(err, &f)
}

// classify turns whatever ended a batch into its failure: a decided one as
// it is; then the batch deadline, the caller going away, a statement or
// lock timeout or an exhausted pool, and last any other database error
// (500). batchCtx is the context under the 8 s deadline, parent the
// caller's.
func classify(err error, batchCtx, parent context.Context) *failure {
	var f *failure
	switch {
	case errors.As(err, &f):
		return f
	case parent.Err() != nil:
		// The caller is gone; nobody reads the answer.
		return &failure{status: http.StatusServiceUnavailable, text: msgDeadline, cause: err}
	case errors.Is(batchCtx.Err(), context.DeadlineExceeded):
		return &failure{status: http.StatusServiceUnavailable, text: msgDeadline, budget: budgetDeadline, cause: err}
	case pg.IsQueryCanceled(err), pg.IsLockNotAvailable(err), errors.Is(err, pg.ErrAcquireTimeout):
		return &failure{status: http.StatusServiceUnavailable, text: msgDBTimeout, budget: budgetTimeout, cause: err}
	}
	return &failure{status: http.StatusInternalServerError, text: msgInternal, cause: err}
}
