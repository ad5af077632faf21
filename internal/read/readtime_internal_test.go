package read

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clockedReadTime is a readTime on a clock the test moves.
func clockedReadTime(rate, burst time.Duration) (*readTime, *time.Time) {
	t := newReadTime(rate, burst)
	now := time.Unix(1_700_000_000, 0)
	t.now = func() time.Time { return now }
	return t, &now
}

// TestReadTimeEdges: a reader reads while its bucket is above zero, pays
// each read's time, and is refused at zero with the seconds until the
// bucket refills above zero; another reader is not affected.
func TestReadTimeEdges(t *testing.T) {
	rt, now := clockedReadTime(100*time.Millisecond, time.Second)

	// The whole burst spent exactly: the bucket is at zero, the cap.
	res, _, ok := rt.start("a")
	require.True(t, ok)
	require.Zero(t, res, "a reader without history reserves nothing")
	rt.settle("a", res, time.Second)
	_, retry, ok := rt.start("a")
	require.False(t, ok, "at zero the reader is refused")
	require.Equal(t, 1, retry, "the retry is at least a second")

	// One millisecond earned back: above zero, a read may start.
	*now = now.Add(10 * time.Millisecond)
	res, _, ok = rt.start("a")
	require.True(t, ok, "1 ms above zero the reader may read")
	require.Equal(t, 1000.0, res, "it reserves what its last read cost")
	rt.settle("a", res, 1500*time.Millisecond)

	// 1 − 1500 = −1499 ms of debt at 100 ms/s: refused for 15 s.
	_, retry, ok = rt.start("a")
	require.False(t, ok)
	require.Equal(t, 15, retry)
	*now = now.Add(14990 * time.Millisecond) // −0.0 ms: still not above zero
	_, _, ok = rt.start("a")
	require.False(t, ok)
	*now = now.Add(20 * time.Millisecond)
	_, _, ok = rt.start("a")
	require.True(t, ok)

	// Another reader has its own, full bucket.
	_, _, ok = rt.start("b")
	require.True(t, ok)
}

// TestReadTimeReservation: a reader whose reads are heavy cannot start
// many at once: each start reserves the last read's cost, so with 150 ms
// of budget left and 100 ms reads, two start (150 → 50 → −50) and the
// third waits; a settle gives the reservation back and pays the cost.
func TestReadTimeReservation(t *testing.T) {
	rt, _ := clockedReadTime(100*time.Millisecond, time.Second)
	res, _, ok := rt.start("a")
	require.True(t, ok)
	rt.settle("a", res, 750*time.Millisecond) // 250 left; last = 750
	res, _, ok = rt.start("a")
	require.True(t, ok)
	rt.settle("a", res, 100*time.Millisecond) // 250 − 750 reserved + 750 − 100 paid: 150 left; last = 100
	var started []float64
	for {
		res, _, ok := rt.start("a")
		if !ok {
			break
		}
		started = append(started, res)
		require.Less(t, len(started), 10, "reservations must bound concurrent starts")
	}
	require.Equal(t, []float64{100, 100}, started, "150 → 50 → −50: two start")
	rt.settle("a", started[1], 0) // −50 + 100 − 0 = 50: one more may start
	_, _, ok = rt.start("a")
	require.True(t, ok)
}

// TestReadTimeSweep: buckets that are full and idle are dropped once the
// map reaches its sweep size; a bucket in debt or with a read open stays.
func TestReadTimeSweep(t *testing.T) {
	rt, now := clockedReadTime(100*time.Millisecond, time.Second)
	res, _, _ := rt.start("debtor")
	rt.settle("debtor", res, 5*time.Second)
	_, _, _ = rt.start("open")    // never settled
	for i := range minSweep - 2 { // with debtor and open: the sweep size

		r, _, ok := rt.start("idle" + strconv.Itoa(i))
		require.True(t, ok)
		rt.settle("idle"+strconv.Itoa(i), r, time.Millisecond)
	}
	*now = now.Add(time.Second) // every idle bucket refills to full
	_, _, ok := rt.start("newcomer")
	require.True(t, ok)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var kept []string
	for k := range rt.buckets {
		kept = append(kept, k)
	}
	require.ElementsMatch(t, []string{"debtor", "open", "newcomer"}, kept, "the idle, full buckets are gone")
	require.Equal(t, minSweep, rt.sweepAt)
}

// TestReadTimeOff: a zero rate is no budget at all.
func TestReadTimeOff(t *testing.T) {
	rt := newReadTime(0, time.Second)
	require.Nil(t, rt)
	for range 1000 {
		res, _, ok := rt.start("a")
		require.True(t, ok)
		rt.settle("a", res, time.Hour)
	}
}
