package store

import (
	"errors"

	"github.com/buzz-relay/buzz/internal/pg"
)

// IsStatementCanceled reports whether err is a statement the server
// cancelled: its statement_timeout, or the cancel request the writer pool
// sends when a read's context ends mid-statement (SQLSTATE 57014). Callers
// that hold no pg import (the read door) ask here.
func IsStatementCanceled(err error) bool { return pg.IsQueryCanceled(err) }

// IsAcquireTimeout reports whether err is a read that found no pooled
// connection within its acquire timeout (NewReader).
func IsAcquireTimeout(err error) bool { return errors.Is(err, pg.ErrAcquireTimeout) }
