package event

import "time"

// MaxClockDrift is how far a stored event's created_at may be from the
// server clock when it is stored, on every door (docs/PROTOCOL.md §3.2):
// the pipeline refuses an event outside it, and the importer one dated
// further ahead of the real clock. No stored event is therefore more than
// MaxClockDrift ahead of the clock of the relay that stored it, which is
// what lets a read bound created_at from above (docs/ARCHITECTURE.md
// "Created-at ceiling").
const MaxClockDrift = 900 * time.Second
