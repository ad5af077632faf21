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
