package threadwindow

// The budgets of §5.7, shared by every window of a batch and never reset,
// not even when a window restarts on the writer after a replica doubt.
const (
	maxAuxPages     = 64
	maxRawRows      = 8192
	maxPayloadBytes = 8 << 20
	maxResponse     = 8 << 20
)

// budget is what a batch has spent so far. It is used by one goroutine.
type budget struct {
	pages    int
	rawRows  int
	payload  int64
	response int64
}

// page charges one aux page (a scan and its load), before it runs.
func (b *budget) page() error {
	b.pages++
	if b.pages > maxAuxPages {
		return exhausted(budgetQuery, msgQueryBudget)
	}
	return nil
}

// row charges one scanned row and its payload bytes (content plus tags
// text), before anything else is done with it.
func (b *budget) row(payloadBytes int64) error {
	b.rawRows++
	if b.rawRows > maxRawRows {
		return exhausted(budgetRawRow, msgRawRowBudget)
	}
	b.payload += payloadBytes
	if b.payload > maxPayloadBytes {
		return exhausted(budgetPayload, msgPayloadBudget)
	}
	return nil
}

// respond charges n bytes of the response: an appended event's JSON length
// plus 1, or 2 for a served window.
func (b *budget) respond(n int) error {
	b.response += int64(n)
	if b.response > maxResponse {
		return exhausted(budgetResponse, msgResponseBudget)
	}
	return nil
}
