package admission

// LocalWindows is the number of per-process windows l holds.
func LocalWindows(l *Limiter) int { return l.local.size() }
