package windowbench

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
	fmt.Fprintf(p.w, "buzz-bench windows %7.1fs  %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}
