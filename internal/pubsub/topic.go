package pubsub

import (
	"errors"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
)

// ControlTopic carries the control messages of docs/PROTOCOL.md §16.4. Every process
// subscribes to it for as long as it runs.
const ControlTopic = "buzz:control"

const (
	topicPrefix    = "buzz:"
	channelInfix   = ":channel:"
	globalSuffix   = ":global"
	windowSuffix   = ":window"
	barrierPrefix  = "buzz:barrier:"
	presenceInfix  = ":presence:"
	uuidLen        = 36
	maxTopicLength = len(topicPrefix) + uuidLen + len(channelInfix) + uuidLen
)

// ErrInvalidTopic is returned by ParseTopic for a name that is not an event
// topic of docs/PROTOCOL.md §16.1.
var ErrInvalidTopic = errors.New("not an event topic")

// Topic is the Redis topic of an event (docs/PROTOCOL.md §16.1): its community and,
// for a channel event, its channel. Both are lowercase hyphenated UUIDs,
// never host names (a host can have aliases). The zero Channel means the
// community's global topic, which carries every event without a channel.
// Window marks the community's window topic, which carries every stored
// event of the community a second time, for the processes that hold its
// hot window (docs/ARCHITECTURE.md "Hot window").
type Topic struct {
	// Community is the community id.
	Community string
	// Channel is the channel id; "" for the global and window topics.
	Channel string
	// Window is true for the window topic.
	Window bool
}

// ChannelTopic is the topic of the events of channel in community.
func ChannelTopic(community, channel string) Topic {
	return Topic{Community: community, Channel: channel}
}

// GlobalTopic is the topic of community's events without a channel.
func GlobalTopic(community string) Topic { return Topic{Community: community} }

// WindowTopic is the topic of every stored event of community, whatever
// its channel.
func WindowTopic(community string) Topic { return Topic{Community: community, Window: true} }

// String is the Redis topic name: buzz:{community}:channel:{channel},
// buzz:{community}:global or buzz:{community}:window. It does not check
// the ids; Valid does.
func (t Topic) String() string {
	if t.Window {
		return topicPrefix + t.Community + windowSuffix
	}
	if t.Channel == "" {
		return topicPrefix + t.Community + globalSuffix
	}
	return topicPrefix + t.Community + channelInfix + t.Channel
}

// Global reports whether t is a community's global topic.
func (t Topic) Global() bool { return t.Channel == "" && !t.Window }

// Valid reports whether the community and (when set) the channel are
// lowercase hyphenated UUIDs, so that String round-trips through
// ParseTopic.
func (t Topic) Valid() bool {
	return isUUID(t.Community) && (t.Channel == "" || isUUID(t.Channel) && !t.Window)
}

// metricLabel is the topic label of the publish and receive metrics.
func (t Topic) metricLabel() string {
	if t.Window {
		return "window"
	}
	if t.Global() {
		return "global"
	}
	return "channel"
}

// ParseTopic parses an event topic name strictly: the buzz prefix, a
// lowercase hyphenated community UUID, then ":global" or ":channel:" and a
// lowercase hyphenated channel UUID, and nothing else. The control and
// barrier topics are not event topics. Errors wrap ErrInvalidTopic.
func ParseTopic(name string) (Topic, error) {
	if len(name) > maxTopicLength || !strings.HasPrefix(name, topicPrefix) {
		return Topic{}, ErrInvalidTopic
	}
	rest := name[len(topicPrefix):]
	if len(rest) < uuidLen || !isUUID(rest[:uuidLen]) {
		return Topic{}, ErrInvalidTopic
	}
	t := Topic{Community: rest[:uuidLen]}
	switch scope := rest[uuidLen:]; {
	case scope == globalSuffix:
		return t, nil
	case scope == windowSuffix:
		t.Window = true
		return t, nil
	case strings.HasPrefix(scope, channelInfix) && isUUID(scope[len(channelInfix):]):
		t.Channel = scope[len(channelInfix):]
		return t, nil
	}
	return Topic{}, ErrInvalidTopic
}

// BarrierTopic is the delivery-barrier topic of a process (docs/PROTOCOL.md §16.2),
// read only by that process.
func BarrierTopic(processID string) string { return barrierPrefix + processID }

// PresenceKey is the Redis key that holds a pubkey's presence status in a
// community (docs/PROTOCOL.md §16.5): buzz:{community}:presence:{pubkey_hex}.
func PresenceKey(community, pubkey string) string {
	return topicPrefix + community + presenceInfix + pubkey
}

// receiveLabel is the topic label of buzz_pubsub_messages_received_total
// for a topic name the subscription connection delivered.
func receiveLabel(name string) string {
	switch {
	case name == ControlTopic:
		return "control"
	case strings.HasPrefix(name, barrierPrefix):
		return "barrier"
	case strings.HasSuffix(name, globalSuffix):
		return "global"
	case strings.HasSuffix(name, windowSuffix):
		return "window"
	}
	return "channel"
}

// isUUID reports whether s is a lowercase hyphenated UUID.
func isUUID(s string) bool {
	id, ok := event.ChannelID(s)
	return ok && id == s
}
