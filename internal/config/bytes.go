package config

// Defaults and bounds of the byte budgets (docs/OPERATIONS.md "Running a
// public relay", "Byte budgets").
const (
	DefaultMaxEventBytes   = 393216
	DefaultReadMaxBytes    = 8 << 20
	DefaultSendBufferBytes = 16 << 20
	minMaxEventBytes       = 1024
	minReadMaxBytes        = 1024
	maxReadMaxBytes        = 1 << 30
	minSendBufferBytes     = 2 * minReadMaxBytes
	maxSendBufferBytes     = 1 << 31
)

// ByteBudgets bounds what one event, one read and one connection's
// outbound queue may cost in bytes.
type ByteBudgets struct {
	// MaxEventBytes is the largest event accepted on either door, measured
	// as its serialized JSON, tags included (BUZZ_MAX_EVENT_BYTES),
	// 1024–BUZZ_MAX_FRAME_BYTES. Default 393216, or BUZZ_MAX_FRAME_BYTES
	// when that is smaller.
	MaxEventBytes int
	// ReadMaxBytes is the stored JSON bytes one REQ history or /query
	// answer may carry across all its filters (BUZZ_READ_MAX_BYTES),
	// at least BUZZ_MAX_EVENT_BYTES, at most 1 GiB. It also caps each
	// channel window's aux closure. Default 8388608 (8 MiB).
	ReadMaxBytes int
	// SendBufferBytes bounds a connection's outbound queue in bytes, next
	// to BUZZ_SEND_BUFFER in messages (BUZZ_SEND_BUFFER_BYTES), at least
	// twice BUZZ_READ_MAX_BYTES so one whole history never trips it, at
	// most 2 GiB. Default 16777216 (16 MiB).
	SendBufferBytes int
}

// byteBudgets reads the byte budgets; frameBytes is BUZZ_MAX_FRAME_BYTES,
// which bounds the event size because an event reaches the WebSocket door
// inside one frame.
func (l *loader) byteBudgets(frameBytes int) ByteBudgets {
	const event, readVar, send = "BUZZ_MAX_EVENT_BYTES", "BUZZ_READ_MAX_BYTES", "BUZZ_SEND_BUFFER_BYTES"
	b := ByteBudgets{}
	b.MaxEventBytes = l.integer(event, min(DefaultMaxEventBytes, frameBytes), minMaxEventBytes, frameBytes)
	b.ReadMaxBytes = l.integer(readVar, max(DefaultReadMaxBytes, b.MaxEventBytes), minReadMaxBytes, maxReadMaxBytes)
	if b.ReadMaxBytes < b.MaxEventBytes {
		l.fail(readVar, "must be at least BUZZ_MAX_EVENT_BYTES (%d), or the largest event could never be read (got %d)",
			b.MaxEventBytes, b.ReadMaxBytes)
	}
	b.SendBufferBytes = l.integer(send, max(DefaultSendBufferBytes, 2*b.ReadMaxBytes), minSendBufferBytes, maxSendBufferBytes)
	if b.SendBufferBytes < 2*b.ReadMaxBytes {
		l.fail(send, "must be at least twice BUZZ_READ_MAX_BYTES (%d), so one whole history never closes its reader (got %d)",
			2*b.ReadMaxBytes, b.SendBufferBytes)
	}
	return b
}
