package benchstat

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func ms(xs ...int) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"Empty", nil, 50, 0},
		{"One", ms(7), 99, 7 * time.Millisecond},
		{"MedianOdd", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"MedianEven", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"P99Of100", ms(hundred...), 99, 99 * time.Millisecond},
		{"P95Of100", ms(hundred...), 95, 95 * time.Millisecond},
		{"P90Of100", ms(hundred...), 90, 90 * time.Millisecond},
		{"P99Of1000", ms(thousand()...), 99, 990 * time.Millisecond},
		{"Max", ms(hundred...), 100, 100 * time.Millisecond},
		{"BelowZero", ms(1, 2, 3), -5, 1 * time.Millisecond},
		{"AboveHundred", ms(1, 2, 3), 150, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Percentile(tt.sorted, tt.p))
		})
	}
}

func thousand() []int {
	out := make([]int, 1000)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestSorted(t *testing.T) {
	t.Parallel()
	in := ms(5, 1, 3)
	require.Equal(t, ms(1, 3, 5), Sorted(in))
	require.Equal(t, ms(5, 1, 3), in, "the input is left as it is")
	require.Empty(t, Sorted(nil))
}

func TestMillis(t *testing.T) {
	t.Parallel()
	d := 1234567 * time.Nanosecond
	require.InDelta(t, 1.235, Millis(d, 3), 1e-12)
	require.InDelta(t, 1.2, Millis(d, 1), 1e-12)
	require.InDelta(t, 1.0, Millis(d, 0), 1e-12)
	require.InDelta(t, 1.234567, Millis(d, 9), 1e-12, "places above 6 are 6")
	require.InDelta(t, 2.5, Millis(2450*time.Microsecond, 1), 1e-12, "half away from zero")
}
