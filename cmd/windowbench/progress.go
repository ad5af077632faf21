package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress writes timestamped lines about what the run is doing.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, start: time.Now()} }

// logf writes one line, prefixed with the time since the run started.
func (p *progress) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "windowbench %7.1fs  %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// every logs line() every d until the returned stop is called.
func (p *progress) every(d time.Duration, line func() string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.logf("%s", line())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
