package window

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The query budget cannot be reached through the raw-row budget with real
// data (64 pages need more than 8,192 rows), so it is checked here, with
// the other two charges.
func TestBudgetLimits(t *testing.T) {
	t.Parallel()
	b := threadBudget()
	for range maxAuxPages {
		require.NoError(t, b.page())
	}
	require.Equal(t, exhausted(budgetQuery, "thread window query budget exceeded; reduce window work before retrying"), b.page())

	b = threadBudget()
	for range maxRawRows {
		require.NoError(t, b.row(0))
	}
	require.Equal(t, exhausted(budgetRawRow, "thread window raw row budget exceeded; reduce window work before retrying"), b.row(0))

	b = threadBudget()
	require.NoError(t, b.row(8<<20))
	require.Equal(t, exhausted(budgetPayload, "thread window payload byte budget exceeded; reduce window work before retrying"), b.row(1))

	b = threadBudget()
	require.NoError(t, b.respond(8<<20))
	require.Equal(t, exhausted(budgetResponse, "thread window exceeds response byte budget"), b.respond(1))
	require.Zero(t, b.left(), "a failing budget never stops a page early")
}

// A channel-mode budget cuts instead of failing: its pages count per hop,
// its rows are free, and the kept bytes stop the closure.
func TestChannelBudget(t *testing.T) {
	t.Parallel()
	b := channelBudget(100)
	for range 2 {
		b.hop()
		for range auxMaxPages {
			require.NoError(t, b.page())
		}
		require.ErrorIs(t, b.page(), errHopCut)
	}
	for range maxRawRows + 1 {
		require.NoError(t, b.row(1<<20))
	}
	require.Equal(t, int64(100), b.left())
	require.NoError(t, b.keep(make([]byte, 60)))
	require.Equal(t, int64(40), b.left())
	require.ErrorIs(t, b.keep(make([]byte, 41)), errSpent)
	require.NoError(t, b.keep(make([]byte, 40)), "an event that did not fit is not charged")
	require.Equal(t, int64(1), b.left(), "a spent budget still reads one row")

	require.Zero(t, channelBudget(0).left(), "no bound")
	require.NoError(t, channelBudget(0).keep(make([]byte, 1<<30)))
}

// A page position must move strictly forward in (created_at DESC, id ASC),
// to the microsecond.
func TestAfter(t *testing.T) {
	t.Parallel()
	at := func(s int64, us int) time.Time { return time.Unix(s, int64(us)*1000) }
	require.True(t, position{at(9, 0), []byte("b")}.after(position{at(10, 0), []byte("a")}))
	require.True(t, position{at(10, 0), []byte("b")}.after(position{at(10, 0), []byte("a")}))
	require.False(t, position{at(10, 0), []byte("a")}.after(position{at(10, 0), []byte("a")}))
	require.False(t, position{at(11, 0), []byte("a")}.after(position{at(10, 0), []byte("a")}))
	require.True(t, position{at(10, 1), []byte("a")}.after(position{at(10, 2), []byte("a")}))
}
