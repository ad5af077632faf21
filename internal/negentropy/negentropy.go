package negentropy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Version is the protocol version byte this relay speaks (version 1).
const Version byte = 0x61

// Sizes of the protocol's fixed fields.
const (
	IDSize          = 32
	FingerprintSize = 16
	// MinFrameLimit is the smallest frame size limit Respond accepts.
	MinFrameLimit = 4096
	// buckets is how many fingerprinted ranges a differing range is split
	// into; a range of fewer than 2*buckets records is sent as an IdList.
	buckets = 16
	// frameSlack is the room kept below the frame limit for the last range.
	frameSlack = 200
)

// The modes of a range.
const (
	modeSkip        = 0
	modeFingerprint = 1
	modeIDList      = 2
)

// infinity is the reserved timestamp of the last bound.
const infinity = math.MaxUint64

// ErrVersion is a message whose version byte is not Version.
var ErrVersion = errors.New("unsupported protocol version")

// ErrMalformed wraps every decoding failure of a message.
var ErrMalformed = errors.New("malformed message")

// Item is one record: a timestamp (an event's created_at) and an id.
type Item struct {
	Timestamp uint64
	ID        [IDSize]byte
}

func compareItems(a, b Item) int {
	if a.Timestamp != b.Timestamp {
		if a.Timestamp < b.Timestamp {
			return -1
		}
		return 1
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// Set is the relay's records of one session, sorted by timestamp, then id.
type Set struct{ items []Item }

// NewSet sorts items in place and returns them as a Set; a duplicate
// record is kept once. The Set owns the slice afterwards.
func NewSet(items []Item) *Set {
	slices.SortFunc(items, compareItems)
	items = slices.CompactFunc(items, func(a, b Item) bool { return a == b })
	return &Set{items: items}
}

// Len is the number of records.
func (s *Set) Len() int { return len(s.items) }

// bound is the upper bound of a range: records below it are in the range.
// An id prefix shorter than IDSize is padded with zero bytes.
type bound struct {
	timestamp uint64
	prefix    []byte
}

// below reports whether item sorts before the bound.
func (b bound) below(it Item) bool {
	if it.Timestamp != b.timestamp {
		return it.Timestamp < b.timestamp
	}
	var padded [IDSize]byte
	copy(padded[:], b.prefix)
	return bytes.Compare(it.ID[:], padded[:]) < 0
}

// lowerBound returns the first index in [begin, end) whose record is not
// below b, or end.
func (s *Set) lowerBound(begin, end int, b bound) int {
	if begin >= end {
		return begin
	}
	i, _ := slices.BinarySearchFunc(s.items[begin:end], b, func(it Item, b bound) int {
		if b.below(it) {
			return -1
		}
		return 1
	})
	return begin + i
}

// minimalBound is the shortest bound that separates prev from curr
// (prev < curr): curr's timestamp alone when they differ, else the
// shortest prefix of curr's id that prev's does not share.
func minimalBound(prev, curr Item) bound {
	if prev.Timestamp != curr.Timestamp {
		return bound{timestamp: curr.Timestamp}
	}
	n := 0
	for n < IDSize && prev.ID[n] == curr.ID[n] {
		n++
	}
	return bound{timestamp: curr.Timestamp, prefix: curr.ID[:min(n+1, IDSize)]}
}

// Fingerprint returns the fingerprint of records [begin, end): the first
// FingerprintSize bytes of SHA-256 over the sum of their ids, read as
// little-endian 256-bit integers, modulo 2^256, followed by the count as a
// varint.
func (s *Set) Fingerprint(begin, end int) [FingerprintSize]byte {
	var sum [4]uint64
	for i := begin; i < end; i++ {
		id := &s.items[i].ID
		var carry uint64
		for w := range 4 {
			sum[w], carry = bits.Add64(sum[w], binary.LittleEndian.Uint64(id[8*w:]), carry)
		}
	}
	var buf [IDSize + 10]byte
	for w := range 4 {
		binary.LittleEndian.PutUint64(buf[8*w:], sum[w])
	}
	msg := appendVarint(buf[:IDSize], uint64(end-begin))
	h := sha256.Sum256(msg)
	var fp [FingerprintSize]byte
	copy(fp[:], h[:FingerprintSize])
	return fp
}

// appendVarint appends n as base-128 digits, most significant first, the
// high bit set on every byte but the last.
func appendVarint(b []byte, n uint64) []byte {
	var tmp [10]byte
	i := len(tmp) - 1
	tmp[i] = byte(n & 0x7f)
	for n >>= 7; n > 0; n >>= 7 {
		i--
		tmp[i] = byte(n&0x7f) | 0x80
	}
	return append(b, tmp[i:]...)
}

// reader decodes one message.
type reader struct {
	b    []byte
	last uint64 // the previous timestamp read, for the delta encoding
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func (r *reader) varint() (uint64, error) {
	var n uint64
	for i := 0; ; i++ {
		if i >= len(r.b) {
			return 0, malformed("truncated varint")
		}
		c := r.b[i]
		if n > math.MaxUint64>>7 {
			return 0, malformed("varint overflows 64 bits")
		}
		n = n<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			r.b = r.b[i+1:]
			return n, nil
		}
	}
}

func (r *reader) bytes(n uint64) ([]byte, error) {
	if n > uint64(len(r.b)) {
		return nil, malformed("truncated field of %d bytes", n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out, nil
}

func (r *reader) timestamp() (uint64, error) {
	v, err := r.varint()
	if err != nil {
		return 0, err
	}
	if v == 0 || r.last == infinity {
		r.last = infinity
		return infinity, nil
	}
	ts := v - 1 + r.last
	if ts < r.last || ts == infinity {
		return 0, malformed("timestamp overflows")
	}
	r.last = ts
	return ts, nil
}

func (r *reader) bound() (bound, error) {
	ts, err := r.timestamp()
	if err != nil {
		return bound{}, err
	}
	n, err := r.varint()
	if err != nil {
		return bound{}, err
	}
	if n > IDSize {
		return bound{}, malformed("bound id prefix of %d bytes", n)
	}
	p, err := r.bytes(n)
	if err != nil {
		return bound{}, err
	}
	return bound{timestamp: ts, prefix: p}, nil
}

// writer encodes one message.
type writer struct {
	b    []byte
	last uint64
}

func (w *writer) timestamp(ts uint64) {
	if ts == infinity {
		w.last = infinity
		w.b = appendVarint(w.b, 0)
		return
	}
	delta := ts - w.last
	w.last = ts
	w.b = appendVarint(w.b, delta+1)
}

func (w *writer) bound(b bound) {
	w.timestamp(b.timestamp)
	w.b = appendVarint(w.b, uint64(len(b.prefix)))
	w.b = append(w.b, b.prefix...)
}

// Respond answers one client message: a range whose fingerprint matches
// is skipped, one that differs is split into fingerprinted buckets (or
// listed when small), and a client's IdList is answered with the relay's
// ids in that range. frameLimit (at least MinFrameLimit) bounds the
// answer's bytes: when it would be passed, the rest of the set is sent as
// one fingerprint and the client asks again. The error is ErrVersion for a
// message of another version, or wraps ErrMalformed.
func Respond(s *Set, msg []byte, frameLimit int) ([]byte, error) {
	frameLimit = max(frameLimit, MinFrameLimit)
	if len(msg) == 0 {
		return nil, malformed("empty message")
	}
	if msg[0] != Version {
		return nil, ErrVersion
	}
	r := &reader{b: msg[1:]}
	out := &writer{b: []byte{Version}}
	part := &writer{}
	exceeded := func(n int) bool { return n > frameLimit-frameSlack }

	n := len(s.items)
	prevIndex := 0
	prevBound := bound{}
	skipping := false
	// endSkip writes the pending run of skipped ranges, straight into the
	// answer: a range that follows starts at its bound.
	endSkip := func() {
		if skipping {
			skipping = false
			out.bound(prevBound)
			out.b = appendVarint(out.b, modeSkip)
		}
	}
	for len(r.b) > 0 {
		curr, err := r.bound()
		if err != nil {
			return nil, err
		}
		mode, err := r.varint()
		if err != nil {
			return nil, err
		}
		lower := prevIndex
		upper := s.lowerBound(prevIndex, n, curr)
		// part is this range's answer; it continues out's timestamp
		// encoding and hands it back when it is appended.
		part.b = part.b[:0]
		switch mode {
		case modeSkip:
			skipping = true
		case modeFingerprint:
			theirs, err := r.bytes(FingerprintSize)
			if err != nil {
				return nil, err
			}
			ours := s.Fingerprint(lower, upper)
			if bytes.Equal(theirs, ours[:]) {
				skipping = true
				break
			}
			endSkip()
			part.last = out.last
			s.splitRange(part, lower, upper, curr)
		case modeIDList:
			count, err := r.varint()
			if err != nil {
				return nil, err
			}
			if count > uint64(len(r.b))/IDSize {
				return nil, malformed("id list of %d ids in %d bytes", count, len(r.b))
			}
			if _, err := r.bytes(count * IDSize); err != nil {
				return nil, err
			}
			endSkip()
			part.last = out.last
			// The relay's ids of the range, as many as fit: the list then
			// ends at the first id left out.
			end, listed := curr, lower
			for ; listed < upper; listed++ {
				if exceeded(len(out.b) + 2*IDSize + (listed-lower+1)*IDSize) {
					end = bound{timestamp: s.items[listed].Timestamp, prefix: s.items[listed].ID[:]}
					break
				}
			}
			part.bound(end)
			part.b = appendVarint(part.b, modeIDList)
			part.b = appendVarint(part.b, uint64(listed-lower))
			for i := lower; i < listed; i++ {
				part.b = append(part.b, s.items[i].ID[:]...)
			}
			if listed < upper {
				// The rest of the set as one range: the client splits it again.
				out.b = append(out.b, part.b...)
				out.last = part.last
				return s.rest(out, listed), nil
			}
		default:
			return nil, malformed("unknown mode %d", mode)
		}
		if exceeded(len(out.b) + len(part.b)) {
			return s.rest(out, prevIndex), nil
		}
		out.b = append(out.b, part.b...)
		if len(part.b) > 0 {
			out.last = part.last
		}
		prevIndex, prevBound = upper, curr
	}
	return out.b, nil
}

// rest ends an answer that reached the frame limit with one range from
// the last bound written to infinity, fingerprinting records [from, end).
func (s *Set) rest(out *writer, from int) []byte {
	fp := s.Fingerprint(from, len(s.items))
	out.timestamp(infinity)
	out.b = appendVarint(out.b, 0)
	out.b = appendVarint(out.b, modeFingerprint)
	out.b = append(out.b, fp[:]...)
	return out.b
}

// splitRange writes the relay's view of records [lower, upper) up to
// upperBound: the ids when there are few, else buckets fingerprinted
// ranges separated by minimal bounds.
func (s *Set) splitRange(w *writer, lower, upper int, upperBound bound) {
	count := upper - lower
	if count < 2*buckets {
		w.bound(upperBound)
		w.b = appendVarint(w.b, modeIDList)
		w.b = appendVarint(w.b, uint64(count))
		for i := lower; i < upper; i++ {
			w.b = append(w.b, s.items[i].ID[:]...)
		}
		return
	}
	per, extra := count/buckets, count%buckets
	curr := lower
	for i := range buckets {
		size := per
		if i < extra {
			size++
		}
		fp := s.Fingerprint(curr, curr+size)
		curr += size
		next := upperBound
		if curr != upper {
			next = minimalBound(s.items[curr-1], s.items[curr])
		}
		w.bound(next)
		w.b = appendVarint(w.b, modeFingerprint)
		w.b = append(w.b, fp[:]...)
	}
}
