package wire

// Refusals of the read deadlines and shares and of the HTTP server's
// admission (docs/OPERATIONS.md "Running a public relay").
const (
	// MsgTooManyReads refuses a read whose share (process, connection or
	// pubkey) stayed full for the acquire timeout: CLOSED on REQ and
	// COUNT, 429 on the bridge.
	MsgTooManyReads = "rate-limited: too many concurrent reads"
	// MsgReadTimedOut ends a read that passed its deadline: CLOSED on REQ
	// and COUNT, 503 on the bridge.
	MsgReadTimedOut = "error: read timed out"
	// MsgServerBusy answers (503, with Retry-After) a bridge request over
	// the process's concurrency limit.
	MsgServerBusy = "error: server busy"
)
