package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progressMode is how a long command reports progress on stderr.
type progressMode int

const (
	progressOff  progressMode = iota
	progressBar               // done/total, rate and ETA on one line, redrawn at most 10 times a second
	progressJSON              // one JSON object per line, at most once a second
)

// progress is the progress display of audit verify and community export:
// a bar on a terminal, or JSON lines for scripts.
type progress struct {
	w      io.Writer
	total  int64
	mode   progressMode
	unit   string
	start  time.Time
	mu     sync.Mutex
	last   time.Time
	latest int64
}

// newProgress is the verify progress bar, drawn only when on.
func newProgress(w io.Writer, total int64, on bool) *progress {
	mode := progressOff
	if on {
		mode = progressBar
	}
	return newProgressOf(w, total, "entries", mode)
}

// newProgressOf reports progress over total units in mode.
func newProgressOf(w io.Writer, total int64, unit string, mode progressMode) *progress {
	return &progress{w: w, total: total, mode: mode, unit: unit, start: time.Now()}
}

func (p *progress) set(done int64) {
	if p.mode == progressOff {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latest = done
	every := 100 * time.Millisecond
	if p.mode == progressJSON {
		every = time.Second
	}
	if time.Since(p.last) < every && done < p.total {
		return
	}
	p.last = time.Now()
	p.draw()
}

// rateETA is the rate so far in units per second and the time left at it.
func (p *progress) rateETA() (float64, time.Duration) {
	elapsed := time.Since(p.start).Seconds()
	rate := float64(p.latest) / max(elapsed, 1e-3)
	eta := time.Duration(float64(max(p.total-p.latest, 0)) / max(rate, 1e-3) * float64(time.Second)).Round(time.Second)
	return rate, eta
}

func (p *progress) draw() {
	rate, eta := p.rateETA()
	if p.mode == progressJSON {
		printJSON(p.w, map[string]any{"progress": p.unit, "done": p.latest, "total": p.total,
			"rate_per_s": int64(rate), "eta_s": int64(eta.Seconds())})
		return
	}
	width := 30
	filled := width
	if p.total > 0 {
		filled = int(int64(width) * min(p.latest, p.total) / p.total)
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d %s  %.0f/s  ETA %s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.latest, p.total, p.unit, rate, eta)
}

func (p *progress) done() {
	if p.mode == progressOff {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	if p.mode == progressBar {
		fmt.Fprintln(p.w)
	}
}
