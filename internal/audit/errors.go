package audit

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// The errors of docs/PROTOCOL.md §13.6. Their texts are exact and sanitised: they never
// contain a community id, a constraint or table name; only a seq, which means
// nothing without the chain it indexes. A driver error is kept as the
// wrapped cause of a DatabaseError, for the server log only.

// ChainViolation means the linkage of the chain is broken at Seq (a missing or
// extra predecessor, or a prev_hash that does not name the previous entry).
type ChainViolation struct{ Seq int64 }

func (e *ChainViolation) Error() string {
	return fmt.Sprintf("hash chain integrity violation at seq %d: prev_hash does not match preceding entry", e.Seq)
}

// HashMismatch means the stored hash at Seq is not the hash of the stored fields.
type HashMismatch struct{ Seq int64 }

func (e *HashMismatch) Error() string {
	return fmt.Sprintf("hash mismatch at seq %d: stored hash does not match recomputed hash", e.Seq)
}

// UnknownAction means a stored row carries an action string this build does not know.
type UnknownAction struct{ Seq int64 }

func (e *UnknownAction) Error() string { return "unknown audit action in database" }

// UnsupportedHashVersion means a row's hash_version has no dispatch arm (only 2 has).
type UnsupportedHashVersion struct{ Version int }

func (e *UnsupportedHashVersion) Error() string {
	return fmt.Sprintf("unsupported audit hash version %d", e.Version)
}

// SerializationError means a detail value that cannot be written canonically
// (a non-integer number, invalid JSON). Nothing is hashed.
type SerializationError struct{ What string }

func (e *SerializationError) Error() string { return "serialization error: " + e.What }

// DatabaseError is any database failure, shown by its SQLSTATE only.
type DatabaseError struct {
	Code  string // "" when the failure had no SQLSTATE
	cause error
}

func (e *DatabaseError) Error() string {
	if e.Code == "" {
		return "database error: unavailable"
	}
	return "database error: SQLSTATE " + e.Code
}

// Unwrap returns the driver's error, for the server log only.
func (e *DatabaseError) Unwrap() error { return e.cause }

// dbError sanitises a driver error. nil stays nil; audit errors pass through.
func dbError(err error) error {
	if err == nil {
		return nil
	}
	var (
		cv *ChainViolation
		hm *HashMismatch
		ua *UnknownAction
		uv *UnsupportedHashVersion
		se *SerializationError
		de *DatabaseError
	)
	if errors.As(err, &cv) || errors.As(err, &hm) || errors.As(err, &ua) || errors.As(err, &uv) || errors.As(err, &se) || errors.As(err, &de) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &DatabaseError{Code: pgErr.Code, cause: err}
	}
	return &DatabaseError{cause: err}
}

// IntentError is the failure to write an audit intent inside the caller's
// transaction (docs/PROTOCOL.md §13.5): the caller rolls the whole transaction back,
// answers "error: internal server error" and counts a send error.
type IntentError struct{ err error }

func (e *IntentError) Error() string { return "write audit intent: " + dbError(e.err).Error() }

// Unwrap returns the underlying error.
func (e *IntentError) Unwrap() error { return e.err }

// IsIntentError reports whether err is the failure of an audit intent write:
// an *IntentError from Append, or a database error raised on audit_outbox
// (its table name) by a statement that also wrote other rows.
func IsIntentError(err error) bool {
	var ie *IntentError
	if errors.As(err, &ie) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.TableName == "audit_outbox"
}
