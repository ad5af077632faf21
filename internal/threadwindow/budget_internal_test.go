package threadwindow

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The query budget cannot be reached through the raw-row budget with real
// data (64 pages need more than 8,192 rows), so it is checked here, with
// the other two charges.
func TestBudgetLimits(t *testing.T) {
	t.Parallel()
	var b budget
	for range maxAuxPages {
		require.NoError(t, b.page())
	}
	require.Equal(t, exhausted(budgetQuery, "thread window query budget exceeded; reduce window work before retrying"), b.page())

	b = budget{}
	for range maxRawRows {
		require.NoError(t, b.row(0))
	}
	require.Equal(t, exhausted(budgetRawRow, "thread window raw row budget exceeded; reduce window work before retrying"), b.row(0))

	b = budget{}
	require.NoError(t, b.row(8<<20))
	require.Equal(t, exhausted(budgetPayload, "thread window payload byte budget exceeded; reduce window work before retrying"), b.row(1))

	b = budget{}
	require.NoError(t, b.respond(8<<20))
	require.Equal(t, exhausted(budgetResponse, "thread window exceeds response byte budget"), b.respond(1))
}

// A page cursor must move strictly forward in (created_at DESC, id ASC).
func TestAfter(t *testing.T) {
	t.Parallel()
	require.True(t, after(Cursor{CreatedAt: 9, ID: "b"}, Cursor{CreatedAt: 10, ID: "a"}))
	require.True(t, after(Cursor{CreatedAt: 10, ID: "b"}, Cursor{CreatedAt: 10, ID: "a"}))
	require.False(t, after(Cursor{CreatedAt: 10, ID: "a"}, Cursor{CreatedAt: 10, ID: "a"}))
	require.False(t, after(Cursor{CreatedAt: 11, ID: "a"}, Cursor{CreatedAt: 10, ID: "a"}))
}
