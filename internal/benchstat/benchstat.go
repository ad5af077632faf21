// Package benchstat is the arithmetic every benchmark of buzz-bench reports
// with: nearest-rank percentiles of latencies and their rounding to
// milliseconds.
//
// It owns the one definition of a percentile the figures in
// docs/PERFORMANCE.md use. It does NOT collect samples, time anything or
// print: each benchmark keeps its own samples and its own JSON shape.
package benchstat

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted, which must be in ascending order: the smallest sample with at
// least p percent of the samples at or below it. It returns 0 for an empty
// slice; p ≤ 0 gives the smallest sample and p ≥ 100 the largest.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Sorted returns an ascending copy of d; d is left as it is.
func Sorted(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// Millis is d in milliseconds rounded to places decimals (0 to 6): 3 keeps
// microseconds, 1 tenths of a millisecond.
func Millis(d time.Duration, places int) float64 {
	scale := math.Pow10(min(max(places, 0), 6))
	return math.Round(float64(d)/(float64(time.Millisecond)/scale)) / scale
}
