package search

// scopeKind is the variant of a ChannelScope.
type scopeKind int

const (
	scopeChannels scopeKind = iota
	scopeChannelsOrChannelLess
	scopeChannelLessOnly
	scopeAny
)

// ChannelScope restricts a search to channels (docs/PROTOCOL.md §12.5). Build one with
// Channels, ChannelsOrChannelLess, ChannelLessOnly or Any; the zero value is
// Channels(nil), which matches nothing.
type ChannelScope struct {
	kind scopeKind
	ids  []string
}

// Channels is events of these channels only; channel-less events are
// excluded. Channels(nil) and Channels([]) match nothing.
func Channels(ids []string) ChannelScope { return ChannelScope{kind: scopeChannels, ids: ids} }

// ChannelsOrChannelLess is events of these channels plus channel-less
// events. With no ids it is ChannelLessOnly: it never widens to every
// channel of the community.
func ChannelsOrChannelLess(ids []string) ChannelScope {
	if len(ids) == 0 {
		return ChannelLessOnly()
	}
	return ChannelScope{kind: scopeChannelsOrChannelLess, ids: ids}
}

// ChannelLessOnly is channel-less events only.
func ChannelLessOnly() ChannelScope { return ChannelScope{kind: scopeChannelLessOnly} }

// Any adds no channel predicate. Only for tests and internal tools: no
// request path builds it.
func Any() ChannelScope { return ChannelScope{kind: scopeAny} }

// fragment returns the scope's SQL with arg binding the channel ids.
func (c ChannelScope) fragment(arg func(any) string) string {
	switch c.kind {
	case scopeChannelsOrChannelLess:
		return "(channel_id = ANY(" + arg(nonNil(c.ids)) + "::uuid[]) OR channel_id IS NULL)"
	case scopeChannelLessOnly:
		return "channel_id IS NULL"
	case scopeAny:
		return ""
	default:
		return "channel_id = ANY(" + arg(nonNil(c.ids)) + "::uuid[])"
	}
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}
