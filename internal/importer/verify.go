package importer

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/export"
)

// LineError is a file refused at one line (1-based).
type LineError struct {
	Line int64
	Msg  string
}

// Error names the line and why it is refused.
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// lineErr is a *LineError with a formatted message.
func lineErr(line int64, format string, args ...any) error {
	return &LineError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// trailerPrefix starts the trailer line as the export writes it; an event
// line starts with {"id":.
var trailerPrefix = []byte(`{"type":`)

// lines reads the lines of a file, each with its "\n".
type lines struct {
	r *bufio.Reader
	n int64 // the number of the line last read
}

func newLines(r io.Reader) *lines { return &lines{r: bufio.NewReaderSize(r, 1<<16)} }

// MaxLineBytes bounds one line of a file, before its "\n": the largest
// BUZZ_MAX_FRAME_BYTES, so no event a relay accepted is longer. A longer
// line is refused as soon as it passes the bound, before more of it is
// held in memory.
const MaxLineBytes = 16 << 20

// next returns the next line without its "\n", io.EOF at the end of the
// file, or a *LineError for a last line without its "\n" or a line over
// MaxLineBytes.
func (l *lines) next() ([]byte, error) {
	var b []byte
	var err error
	for {
		var chunk []byte
		chunk, err = l.r.ReadSlice('\n')
		if len(b)+len(chunk) > MaxLineBytes+1 {
			return nil, lineErr(l.n+1, "the line is longer than %d bytes", MaxLineBytes)
		}
		b = append(b, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		if len(b) == 0 {
			return nil, io.EOF
		}
		return nil, lineErr(l.n+1, "the line has no end: the file is truncated")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) { // a cut compressed stream
		return nil, lineErr(l.n+1, "the compressed stream ends early: the file is truncated")
	}
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	l.n++
	return b[:len(b)-1], nil
}

// header reads and checks line 1.
func (l *lines) header() (export.Header, error) {
	b, err := l.next()
	if errors.Is(err, io.EOF) {
		return export.Header{}, lineErr(1, "the file is empty")
	}
	if err != nil {
		return export.Header{}, err
	}
	var h export.Header
	if err := json.Unmarshal(b, &h); err != nil || h.Type != "header" || h.Format != export.Format {
		return export.Header{}, lineErr(1, "not a %s header", export.Format)
	}
	if h.Version != export.Version {
		return export.Header{}, lineErr(1, "format version %d is not supported (this relay reads version %d)", h.Version, export.Version)
	}
	return h, nil
}

// item is one line after the header: an event, or the trailer.
type item struct {
	line    int64
	raw     []byte
	trailer *export.Trailer
}

// item reads the next line after the header. A file that ends before the
// trailer is refused at the line where the trailer was due.
func (l *lines) item() (item, error) {
	b, err := l.next()
	if errors.Is(err, io.EOF) {
		return item{}, lineErr(l.n+1, "the file ends without a trailer: it is truncated")
	}
	if err != nil {
		return item{}, err
	}
	it := item{line: l.n, raw: b}
	if bytes.HasPrefix(b, trailerPrefix) {
		var t export.Trailer
		if err := json.Unmarshal(b, &t); err != nil || t.Type != "trailer" {
			return item{}, lineErr(l.n, "not an event and not a trailer")
		}
		it.trailer = &t
	}
	return it, nil
}

// Verify reads a whole export from r and checks it as docs/OPERATIONS.md
// "Importing a community" says: the header's format and version, every
// event line's JSON, id and signature, the trailer's count against the
// header's and the lines', and its SHA-256 against the event lines. A
// refusal is a *LineError naming the line. It holds one line at a time.
func Verify(r io.Reader) (export.Header, export.Trailer, error) {
	l := newLines(r)
	h, err := l.header()
	if err != nil {
		return export.Header{}, export.Trailer{}, err
	}
	sum := sha256.New()
	var events int64
	for {
		it, err := l.item()
		if err != nil {
			return export.Header{}, export.Trailer{}, err
		}
		if t := it.trailer; t != nil {
			if err := checkTrailer(l, h, *t, events, hex.EncodeToString(sum.Sum(nil))); err != nil {
				return export.Header{}, export.Trailer{}, err
			}
			return h, *t, nil
		}
		if _, err := parseEvent(it); err != nil {
			return export.Header{}, export.Trailer{}, err
		}
		sum.Write(it.raw)
		sum.Write([]byte{'\n'})
		events++
	}
}

// checkTrailer compares the trailer read at line l.n with what was read,
// and requires it to be the last line.
func checkTrailer(l *lines, h export.Header, t export.Trailer, events int64, sum string) error {
	switch {
	case t.Events != events:
		return lineErr(l.n, "the trailer counts %d events, the file has %d", t.Events, events)
	case h.Events != events:
		return lineErr(l.n, "the header counts %d events, the file has %d", h.Events, events)
	case t.SHA256 != sum:
		return lineErr(l.n, "the trailer's SHA-256 %s is not that of the event lines (%s): the file was altered", t.SHA256, sum)
	}
	after := l.n + 1
	if _, err := l.next(); !errors.Is(err, io.EOF) {
		return lineErr(after, "data after the trailer")
	}
	return nil
}

// parseEvent parses an event line and checks its id and signature.
func parseEvent(it item) (event.Event, error) {
	ev, err := event.Parse(it.raw)
	if err != nil {
		return event.Event{}, lineErr(it.line, "not an event: %v", err)
	}
	if _, ok := ev.CheckID(); !ok {
		return event.Event{}, lineErr(it.line, "the id %s is not that of the event's content", ev.ID)
	}
	if !ev.VerifySignature() {
		return event.Event{}, lineErr(it.line, "the signature of event %s does not verify", ev.ID)
	}
	return ev, nil
}
