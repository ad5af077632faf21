package pg_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pg"
)

// ioFailure is how pgconn reports an I/O failure: with whether anything had
// been sent.
type ioFailure struct{ sent bool }

func (e ioFailure) Error() string     { return "unexpected EOF" }
func (e ioFailure) SafeToRetry() bool { return !e.sent }

func TestMayHaveCommitted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Nil", nil, false},
		{"ServerError", fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23505"}), false},
		{"AcquireTimeout", fmt.Errorf("store: %w", pg.ErrAcquireTimeout), false},
		{"NothingSent", fmt.Errorf("insert: %w", ioFailure{sent: false}), false},
		{"AnswerLost", fmt.Errorf("commit: %w", ioFailure{sent: true}), true},
		{"CallerCode", errors.New("apply group: follow-up 39000: sign: no signer"), false},
		{"ReadingResult", fmt.Errorf("insert event: %w", io.ErrUnexpectedEOF), true},
		{"Network", fmt.Errorf("insert event: %w", &net.OpError{Op: "read", Err: errors.New("connection reset")}), true},
		{"ContextEnded", fmt.Errorf("commit: %w", context.DeadlineExceeded), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, pg.MayHaveCommitted(tc.err))
		})
	}
}
