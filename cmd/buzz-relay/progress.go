package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress is the verify progress bar: done/total, rate and ETA on one
// line, redrawn at most 10 times a second, only on a terminal.
type progress struct {
	w      io.Writer
	total  int64
	on     bool
	start  time.Time
	mu     sync.Mutex
	last   time.Time
	drawn  bool
	latest int64
}

func newProgress(w io.Writer, total int64, on bool) *progress {
	return &progress{w: w, total: max(total, 1), on: on, start: time.Now()}
}

func (p *progress) set(done int64) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latest = done
	if time.Since(p.last) < 100*time.Millisecond && done < p.total {
		return
	}
	p.last = time.Now()
	p.draw()
}

func (p *progress) draw() {
	elapsed := time.Since(p.start).Seconds()
	rate := float64(p.latest) / max(elapsed, 1e-3)
	eta := time.Duration(float64(p.total-p.latest) / max(rate, 1e-3) * float64(time.Second)).Round(time.Second)
	width := 30
	filled := int(int64(width) * min(p.latest, p.total) / p.total)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d entries  %.0f/s  ETA %s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.latest, p.total, rate, eta)
	p.drawn = true
}

func (p *progress) done() {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	fmt.Fprintln(p.w)
}
