package soak

// summary is the one JSON object a run prints.
type summary struct {
	DurationS   float64              `json:"duration_s"`
	Relays      int                  `json:"relays"`
	Conns       int                  `json:"conns"`
	PaceMS      float64              `json:"pace_ms,omitempty"`
	Communities int                  `json:"communities"`
	Operations  int                  `json:"operations"`
	Ops         map[string]opSummary `json:"ops"`
	Errors      map[string]int       `json:"errors_by_prefix"`
	ErrorSample map[string][]string  `json:"error_samples,omitempty"`
	RSS         struct {
		StartMB float64 `json:"start_mb"`
		PeakMB  float64 `json:"peak_mb"`
		EndMB   float64 `json:"end_mb"`
	} `json:"relay_rss"`
	Faults []faultReport `json:"faults"`
	Checks *checkReport  `json:"checks"`
	// Lost repeats Checks.Lost: the line an operator looks for.
	Lost int `json:"lost"`
}

// Passed reports whether nothing was lost, every check passed and the
// deployment recovered from every fault by itself.
func (s *summary) Passed() bool {
	if s.Lost != 0 || !s.Checks.ok() {
		return false
	}
	for _, f := range s.Faults {
		if !f.Recovered || f.Error != "" {
			return false
		}
	}
	return true
}

func (s *soakRun) summarize(faults []faultReport, rep *checkReport) *summary {
	sum := &summary{DurationS: round1(s.cfg.duration.Seconds()), Relays: len(s.relays), Conns: s.cfg.conns,
		PaceMS:      float64(s.cfg.pace.Milliseconds()),
		Communities: len(s.comms), Faults: faults, Checks: rep, Lost: rep.Lost}
	if sum.Faults == nil {
		sum.Faults = []faultReport{}
	}
	sum.Ops, sum.Errors, sum.ErrorSample, sum.Operations = s.load.stats.summary()
	s.rss.mu.Lock()
	sum.RSS.StartMB, sum.RSS.PeakMB, sum.RSS.EndMB = mb(s.rss.start), mb(s.rss.peak), mb(s.rss.end)
	s.rss.mu.Unlock()
	return sum
}
