package pg

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrNotFound means a query that needed a row found none (pgx.ErrNoRows).
	ErrNotFound = errors.New("not found")
	// ErrDuplicate means a unique constraint rejected a row (SQLSTATE 23505).
	ErrDuplicate = errors.New("duplicate")
)

// MapError turns pgx.ErrNoRows into ErrNotFound and unique violations into
// ErrDuplicate, wrapping the original so errors.Is matches both. Any other
// error, and nil, is returned unchanged.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %w", ErrDuplicate, err)
	}
	return err
}

// IsQueryCanceled reports whether err is a statement canceled by
// statement_timeout or a cancel request (SQLSTATE 57014).
func IsQueryCanceled(err error) bool { return hasCode(err, "57014") }

// IsLockNotAvailable reports whether err is a lock_timeout expiry
// (SQLSTATE 55P03).
func IsLockNotAvailable(err error) bool { return hasCode(err, "55P03") }

func hasCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// IsCreatedAtFloor reports whether err is the events_created_at_floor
// trigger refusing, at COMMIT, a channel row older than the connection's
// buzz.created_at_floor (SQLSTATE 23514, migration 0005).
func IsCreatedAtFloor(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "events_created_at_floor"
}

// Exact messages of the NIP-RS read-state triggers (migration 0006,
// docs/PROTOCOL.md §14.3). Both are raised with SQLSTATE 23514 (check_violation).
const (
	staleWatermarkMessage  = "stale NIP-RS event rejected by durable watermark"
	hardDeleteFenceMessage = "NIP-RS hard delete requires corrected writer opt-in"
)

// IsStaleWatermark reports whether err is the trg_events_nip_rs_watermark
// trigger refusing the insert of a conforming read-state event that does not
// outrank its coordinate's durable watermark (SQLSTATE 23514, migration
// 0006). The statement failed and its transaction is aborted. An insert of
// the watermark's exact tuple is not an error: it affects 0 rows.
func IsStaleWatermark(err error) bool { return hasMessage(err, "23514", staleWatermarkMessage) }

// IsHardDeleteFence reports whether err is the
// trg_events_guard_nip_rs_hard_delete trigger refusing a DELETE of an events
// row at a read-state coordinate in a transaction that did not opt in with
// set_config('buzz.nip_rs_hard_delete', 'on', true) (SQLSTATE 23514,
// migration 0006). The transaction is aborted: it must roll back, and the
// rows it meant to delete survive.
func IsHardDeleteFence(err error) bool { return hasMessage(err, "23514", hardDeleteFenceMessage) }

func hasMessage(err error, code, message string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code && pgErr.Message == message
}
