package window

import "errors"

// The thread-mode budgets of docs/NIP-CW.md §5.7, shared by every window
// of a batch and never reset, not even when a window restarts on the
// writer after a replica doubt.
const (
	maxAuxPages     = 64
	maxRawRows      = 8192
	maxPayloadBytes = 8 << 20
	maxResponse     = 8 << 20
)

// Where a channel-mode closure stops short (docs/NIP-CW.md §3.3): it is
// cut, never failed, and the page is served with what was kept.
var (
	// errHopCut ends a hop that ran out of pages; the next hop still runs.
	errHopCut = errors.New("aux hop out of pages")
	// errSpent ends the closure: it ran out of bytes.
	errSpent = errors.New("aux closure out of bytes")
)

// budget bounds the work of the aux closure and the bytes of an answer:
// aux page queries, scanned rows and their payload bytes (content plus
// tags text), and response bytes. A limit of 0 is no limit. In thread
// mode one budget serves the whole batch and crossing a limit fails it
// (a 503 *Error naming the budget); in channel mode each closure has
// one, and crossing a limit cuts the closure (errHopCut, errSpent). It is
// used by one goroutine.
type budget struct {
	// maxPages bounds the aux page queries; perHop counts them per hop.
	maxPages int
	perHop   bool
	// maxRawRows and maxPayload bound the rows an aux or reply scan
	// returns, the probes and deleted rows included.
	maxRawRows int
	maxPayload int64
	// maxResponse bounds the bytes of the answer; each event kept costs
	// its JSON plus sep.
	maxResponse int64
	sep         int
	// cuts makes a crossed limit cut the closure instead of failing.
	cuts bool

	pages    int
	rawRows  int
	payload  int64
	response int64
}

// threadBudget is a thread batch's budget (docs/NIP-CW.md §5.7): each
// event costs its JSON plus 1 (the separator), each window 2.
func threadBudget() *budget {
	return &budget{maxPages: maxAuxPages, maxRawRows: maxRawRows, maxPayload: maxPayloadBytes,
		maxResponse: maxResponse, sep: 1}
}

// channelBudget is a channel-mode closure's budget (docs/NIP-CW.md §3.3):
// auxMaxPages pages per hop, and maxBytes (Config.MaxBytes, 0 for none)
// of aux event JSON.
func channelBudget(maxBytes int) *budget {
	return &budget{maxPages: auxMaxPages, perHop: true, maxResponse: int64(max(maxBytes, 0)), cuts: true}
}

// auxMaxPages is a channel-mode hop's page limit (docs/NIP-CW.md §3.3).
const auxMaxPages = 64

// hop starts a hop of the closure.
func (b *budget) hop() {
	if b.perHop {
		b.pages = 0
	}
}

// page charges one aux page (a scan and its load), before it runs.
func (b *budget) page() error {
	b.pages++
	if b.maxPages > 0 && b.pages > b.maxPages {
		if b.cuts {
			return errHopCut
		}
		return exhausted(budgetQuery, msgQueryBudget)
	}
	return nil
}

// row charges one scanned row and its payload bytes, before anything else
// is done with it.
func (b *budget) row(payloadBytes int64) error {
	b.rawRows++
	if b.maxRawRows > 0 && b.rawRows > b.maxRawRows {
		return exhausted(budgetRawRow, msgRawRowBudget)
	}
	b.payload += payloadBytes
	if b.maxPayload > 0 && b.payload > b.maxPayload {
		return exhausted(budgetPayload, msgPayloadBudget)
	}
	return nil
}

// respond charges n bytes of the response: an event's JSON length plus
// sep (keep), or a thread window's 2.
func (b *budget) respond(n int) error {
	if b.maxResponse > 0 && b.response+int64(n) > b.maxResponse {
		if b.cuts {
			return errSpent
		}
		b.response += int64(n)
		return exhausted(budgetResponse, msgResponseBudget)
	}
	b.response += int64(n)
	return nil
}

// keep charges one kept event of JSON json.
func (b *budget) keep(json []byte) error { return b.respond(len(json) + b.sep) }

// left is the raw payload bytes the next aux page may read before it
// stops early: what a cutting budget has left of its response bytes, at
// least 1; 0 (no stop) for a failing budget or none.
func (b *budget) left() int64 {
	if !b.cuts || b.maxResponse <= 0 {
		return 0
	}
	return max(b.maxResponse-b.response, 1)
}
