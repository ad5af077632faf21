package testsignal_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/testsignal"
)

// recorder is a TB that records failures instead of ending the test, so
// the waits' own failures can be checked.
type recorder struct {
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func TestSignal(t *testing.T) {
	t.Parallel()

	t.Run("UninitialisedIsNoOp", func(t *testing.T) {
		t.Parallel()
		var s testsignal.Signal[int]
		s.Signal(1)
		require.Nil(t, s.WaitC())
		require.Zero(t, s.Dropped())
		var nilSignal *testsignal.Signal[int]
		nilSignal.Signal(1)
		r := &recorder{}
		require.Zero(t, s.WaitFor(r, time.Hour), "an uninitialised wait fails at once")
		require.Equal(t, []string{"testsignal: wait on a signal that was not initialised"}, r.failed)
	})

	t.Run("DeliversInOrder", func(t *testing.T) {
		t.Parallel()
		var s testsignal.Signal[int]
		s.Init()
		go func() {
			for i := range 3 {
				s.Signal(i)
			}
		}()
		for i := range 3 {
			require.Equal(t, i, s.WaitOrTimeout(t))
		}
		s.RequireEmpty(t)
	})

	t.Run("NeverBlocks", func(t *testing.T) {
		t.Parallel()
		var s testsignal.Signal[string]
		s.Init()
		for range testsignal.Buffer + 5 {
			s.Signal("x")
		}
		require.Equal(t, int64(5), s.Dropped())
		require.Len(t, s.WaitC(), testsignal.Buffer)
	})

	t.Run("TimesOut", func(t *testing.T) {
		t.Parallel()
		var s testsignal.Signal[int]
		s.Init()
		r := &recorder{}
		require.Zero(t, s.WaitFor(r, 10*time.Millisecond))
		require.Equal(t, []string{"testsignal: no signal within 10ms"}, r.failed)
	})

	t.Run("RequireEmptyFailsOnAWaitingValue", func(t *testing.T) {
		t.Parallel()
		var s testsignal.Signal[int]
		s.Init()
		s.Signal(7)
		r := &recorder{}
		s.RequireEmpty(r)
		require.Equal(t, []string{"testsignal: unexpected signal 7"}, r.failed)
		s.RequireEmpty(r)
		require.Len(t, r.failed, 1)
	})

	t.Run("InitWhileEmitting", func(t *testing.T) {
		t.Parallel()
		var s testsignal.Signal[int]
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
					s.Signal(1)
				}
			}
		}()
		s.Init()
		require.Equal(t, 1, s.WaitOrTimeout(t))
		close(stop)
		<-done
	})
}
