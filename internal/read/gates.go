package read

import (
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/wire"
)

// gate runs the p-gate, the engram gate and the author-only gate, in that
// order, on every filter, and returns the refusal message of the first one
// that fails, or "" when all pass; the p-gate's text is the REQ one on
// SurfaceREQ and the COUNT one on every other surface. The read door
// applies it to global REQ subscriptions only, and to every filter of
// COUNT, /query and /count.
func gate(reader string, filters []event.Filter, s Surface) string {
	for i := range filters {
		f := &filters[i]
		if f.Search != nil && f.Kinds == nil {
			continue // judged as if it named only the searchable kinds: never gated
		}
		if !pGatePasses(reader, f) {
			if s == SurfaceREQ {
				return wire.MsgPGateREQ
			}
			return wire.MsgPGateCount
		}
		if !engramGatePasses(reader, f) {
			return wire.MsgEngram
		}
		if !authorOnlyGatePasses(reader, f) {
			return wire.MsgAuthorOnly
		}
	}
	return ""
}

func pGatePasses(reader string, f *event.Filter) bool {
	if !f.CanMatchAny(event.PGated) {
		return true
	}
	if len(f.IDs) > 0 && !f.CanMatchAnyListed(event.ResultGated) {
		return true
	}
	return allEqual(f.Tags["p"], reader)
}

func engramGatePasses(reader string, f *event.Filter) bool {
	if len(f.IDs) > 0 || !f.CanMatchKind(event.KindEngram) {
		return true
	}
	return allEqual(f.Authors, reader) || allEqual(f.Tags["p"], reader)
}

func authorOnlyGatePasses(reader string, f *event.Filter) bool {
	if len(f.Kinds) == 0 {
		return true
	}
	for _, k := range f.Kinds {
		if !event.AuthorOnly.Has(k) {
			return true
		}
	}
	return allEqual(f.Authors, reader)
}

// allEqual reports whether vals is non-empty and every value equals want,
// hex compared case-insensitively.
func allEqual(vals []string, want string) bool {
	if len(vals) == 0 {
		return false
	}
	for _, v := range vals {
		if !strings.EqualFold(v, want) {
			return false
		}
	}
	return true
}

// visibleTo applies per-event visibility (docs/PROTOCOL.md §7.7) except the channel
// check: Event.VisibleTo.
func visibleTo(reader string, ev *event.Event) bool { return ev.VisibleTo(reader) }
