// Package logtest holds what tests need to read log output that background
// goroutines or child processes write while the test runs. TEST ONLY.
//
// It imports nothing from internal/ and does NOT format or parse log lines.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers: pass it
// as a slog handler's writer or a child's stdout, and read it with String
// while they write. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
