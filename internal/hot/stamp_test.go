package hot_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/hot"
)

// A stamp (docs/ARCHITECTURE.md "Search cache") vouches only until the
// community's next expiration: the one PostgreSQL gives, lowered by a
// commit that carries an earlier one, and read again once it has passed.
// A commit of any kind ends what an earlier stamp vouched for; without
// its next expiration the window gives no stamp.
func TestStampExpiry(t *testing.T) {
	t.Parallel()
	now := time.Now().Unix()
	var next atomic.Int64
	var reads atomic.Int32
	var fail atomic.Bool
	w := hot.New(hot.Config{Events: 10,
		Warm: func(context.Context, string, int) ([]*hot.Entry, error) { return nil, nil },
		NextExpiry: func(context.Context, string) (int64, error) {
			reads.Add(1)
			if fail.Load() {
				return 0, errors.New("down")
			}
			return next.Load(), nil
		}})
	w.SetEnabled(true, "")
	ctx := context.Background()
	watch := func() (hot.Stamp, bool) { return w.Watch(ctx, "c") }

	next.Store(now) // passed already: no stamp, and it is read again next time
	require.Eventually(t, func() bool { _, ok := watch(); return reads.Load() > 0 && !ok }, 5*time.Second, time.Millisecond)
	next.Store(now + 100)
	s, ok := watch()
	require.True(t, ok)
	require.True(t, s.Vouches(s, now+99))
	require.False(t, s.Vouches(s, now+100), "an expiration reached")
	n := reads.Load()
	again, ok := watch()
	require.True(t, ok)
	require.Equal(t, n, reads.Load(), "known, and not passed: not read again")
	require.True(t, s.Vouches(again, now))

	// An event committed with an earlier expiration lowers it; the commit
	// itself ends what s vouched for.
	key := eventtest.NewKey()
	ev := key.Signed(t, 9, eventtest.Tag("expiration", strconv.FormatInt(now+50, 10)))
	w.Committed("c", "", &ev, nil)
	s2, ok := watch()
	require.True(t, ok)
	require.False(t, s.Vouches(s2, now))
	require.True(t, s2.Vouches(s2, now+49))
	require.False(t, s2.Vouches(s2, now+50))

	w.Reset("c", "test")
	fail.Store(true)
	require.Eventually(t, func() bool { _, ok := watch(); return !ok && reads.Load() > n }, 5*time.Second, time.Millisecond)
	_, ok = watch()
	require.False(t, ok, "no stamp without the next expiration")
}
