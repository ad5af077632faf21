package metrics

import "github.com/prometheus/client_golang/prometheus"

// HotWindow holds the hot window's metrics (docs/OPERATIONS.md "Hot
// window"). Package hot moves all of them.
type HotWindow struct {
	// Events is buzz_hot_window_events (gauge): events held, every
	// community.
	Events prometheus.Gauge
	// Bytes is buzz_hot_window_bytes (gauge): their estimated memory.
	Bytes prometheus.Gauge
	// On is buzz_hot_window_on (gauge): 1 while windows may warm and
	// answer, 0 while the process may miss a write it must follow (its
	// LISTEN connection, or with Redis its link, is down) or before it
	// first follows every write.
	On prometheus.Gauge
	// Reads is buzz_hot_window_reads_total (counter, result): REQ filters
	// answered from the window (hit) or sent to PostgreSQL because the
	// filter cannot be (unservable), the window was cold or warming
	// (cold), or its answer reached past the horizon (beyond_horizon).
	Reads *prometheus.CounterVec
	// Resets is buzz_hot_window_resets_total (counter, reason): windows
	// made cold by something they cannot follow exactly.
	Resets *prometheus.CounterVec
	// Warms is buzz_hot_window_warms_total (counter, outcome): warm reads
	// that filled a window (ok) or failed (error), and warms not begun
	// because one that evicts ran less than EvictEvery ago (deferred).
	Warms *prometheus.CounterVec
}

// HotWindowResetReasons are the reason labels of
// buzz_hot_window_resets_total.
var HotWindowResetReasons = []string{
	"admin_deletion", // a kind 9005 deletion: its target is not checked here
	"communities",    // more communities than BUZZ_HOT_WINDOW_COMMUNITIES
	"ambiguous",      // a commit here may have stored an event the stream has not carried
	"external",       // another program wrote to the community's events
	"listen_down",    // the LISTEN connection broke: such a write could be missed
	"bus_gap",        // Redis lost, dropped or failed to carry another process's commits
}

func newHotWindow(reg prometheus.Registerer) HotWindow {
	h := HotWindow{
		Events: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_hot_window_events", Help: "Events held in the hot window, every community."}),
		Bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_hot_window_bytes", Help: "Estimated memory of the events held in the hot window, in bytes."}),
		On: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_hot_window_on", Help: "1 while the hot window may warm and answer, 0 while it is off."}),
		Reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_hot_window_reads_total", Help: "REQ filters answered from the hot window (hit) or sent to PostgreSQL, by result."},
			[]string{"result"}),
		Resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_hot_window_resets_total", Help: "Hot windows made cold, by reason."}, []string{"reason"}),
		Warms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_hot_window_warms_total", Help: "Hot window warm reads, by outcome."}, []string{"outcome"}),
	}
	for _, r := range []string{"hit", "unservable", "cold", "beyond_horizon"} {
		h.Reads.WithLabelValues(r)
	}
	for _, r := range HotWindowResetReasons {
		h.Resets.WithLabelValues(r)
	}
	for _, o := range []string{"ok", "error", "deferred"} {
		h.Warms.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(h.Events, h.Bytes, h.On, h.Reads, h.Resets, h.Warms)
	}
	return h
}
