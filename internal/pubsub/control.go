package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/buzz-relay/buzz/internal/event"
)

// ControlVersion is the v of the control messages this process writes and
// understands.
const ControlVersion = 1

// Op is a control operation of docs/PROTOCOL.md §16.4.
type Op string

// The control operations. What a receiver does for each is the caller's
// business (the caches and the WebSocket server); this package carries
// them.
const (
	// OpMembership drops the membership entry (community, channel, pubkey)
	// and that pubkey's accessible-channel entry. Needs ChannelID, Pubkey.
	OpMembership Op = "membership"
	// OpAccessibleAll drops every accessible-channel entry of the community.
	OpAccessibleAll Op = "accessible_all"
	// OpVisibility drops the channel's visibility entry. Needs ChannelID.
	OpVisibility Op = "visibility"
	// OpEvict removes the channel from the pubkey's local subscriptions.
	// Needs ChannelID, Pubkey.
	OpEvict Op = "evict"
	// OpEvictNonMembers does the same for the channel's subscribers that
	// are not active members. Needs ChannelID.
	OpEvictNonMembers Op = "evict_non_members"
	// OpEvictAll does the same for every subscriber of the channel and
	// drops every cache entry of it. Needs ChannelID.
	OpEvictAll Op = "evict_all"
	// OpRelayMemberRemoved closes the pubkey's local connections in the
	// community. Needs Pubkey.
	OpRelayMemberRemoved Op = "relay_member_removed"
	// OpHosts drops every cached host resolution: a community or an alias
	// was added (operator commands), so a host this process cached as
	// unknown may now resolve (docs/PROTOCOL.md §16.4). Newer than the ops
	// above: a process that predates it ignores it with a warning.
	OpHosts Op = "hosts"
	// OpGap says the sender failed to publish at least one event of the
	// community, the last at UntilMS: every live subscription of the
	// community registered up to then may have missed it and is closed
	// with the interruption message. Needs UntilMS (docs/PROTOCOL.md §16.3, §16.4;
	// see gap.go); a process that predates it ignores it with a warning.
	OpGap Op = "gap"
)

// opFields says which fields each known operation needs.
var opFields = map[Op]struct{ channel, pubkey bool }{
	OpMembership:         {channel: true, pubkey: true},
	OpAccessibleAll:      {},
	OpVisibility:         {channel: true},
	OpEvict:              {channel: true, pubkey: true},
	OpEvictNonMembers:    {channel: true},
	OpEvictAll:           {channel: true},
	OpRelayMemberRemoved: {pubkey: true},
	OpGap:                {},
	OpHosts:              {},
}

// Control is a control message (docs/PROTOCOL.md §16.4), on the wire exactly
//
//	{"v":1,"origin":"<process_id>","community":"<community uuid>","op":"<op>", …op fields}
//
// with the op fields channel_id and pubkey (hex) present only when set.
type Control struct {
	// V is the format version, ControlVersion.
	V int `json:"v"`
	// Origin is the process id of the sender.
	Origin string `json:"origin"`
	// Community is the community id.
	Community string `json:"community"`
	// Op is the operation.
	Op Op `json:"op"`
	// ChannelID is the channel id, for the ops that need one.
	ChannelID string `json:"channel_id,omitempty"`
	// Pubkey is the hex pubkey, for the ops that need one.
	Pubkey string `json:"pubkey,omitempty"`
	// UntilMS is the sender's wall clock, in Unix milliseconds, at its
	// newest failed publish; OpGap only.
	UntilMS int64 `json:"until_ms,omitempty"`
}

// check reports what is wrong with a control message of a known version
// and operation, or nil.
func (c *Control) check() error {
	need := opFields[c.Op]
	switch {
	case !isUUID(c.Community):
		return errors.New("community must be a lowercase hyphenated UUID")
	case !isUUID(c.Origin):
		return errors.New("origin must be a lowercase hyphenated UUID")
	case need.channel != isUUID(c.ChannelID):
		if need.channel {
			return fmt.Errorf("%s needs a channel_id UUID", c.Op)
		}
		return fmt.Errorf("%s takes no channel_id", c.Op)
	case need.pubkey != event.IsHex64(c.Pubkey):
		if need.pubkey {
			return fmt.Errorf("%s needs a hex pubkey", c.Op)
		}
		return fmt.Errorf("%s takes no pubkey", c.Op)
	case (c.Op == OpGap) != (c.UntilMS > 0):
		if c.Op == OpGap {
			return fmt.Errorf("%s needs a positive until_ms", c.Op)
		}
		return fmt.Errorf("%s takes no until_ms", c.Op)
	}
	return nil
}

// PublishControl sends c to the other processes on buzz:control, with V
// and Origin filled in. Call it after the effect was applied locally and
// the transaction committed (docs/PROTOCOL.md §16.4). It is bounded by PublishTimeout,
// never retried, and skipped while the link is known down; the error is
// for the record only (a lost control message is covered by the caches'
// TTLs and the periodic revalidation), and it is also counted and logged.
func (b *Bus) PublishControl(ctx context.Context, c Control) error {
	c.V, c.Origin = ControlVersion, b.cfg.ProcessID
	if _, known := opFields[c.Op]; !known {
		return fmt.Errorf("publish control: unknown op %q", c.Op)
	}
	if err := c.check(); err != nil {
		return fmt.Errorf("publish control %s: %w", c.Op, err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("publish control %s: %w", c.Op, err)
	}
	client := b.pool()
	if client == nil {
		err = ErrDisconnected
	} else {
		err = publish(ctx, client, ControlTopic, payload)
	}
	if err != nil {
		b.publishFailed("control", ControlTopic, err)
		return fmt.Errorf("publish control %s: %w", c.Op, err)
	}
	b.m.ControlMessages.WithLabelValues(string(c.Op), "sent").Inc()
	return nil
}

// handleControl checks a control message and hands it to ControlFunc,
// unless this process sent it. Unknown versions and operations are ignored
// with a warning, so a newer process can add operations during a rolling
// upgrade; malformed messages are dropped as invalid.
func (b *Bus) handleControl(payload string) {
	var c Control
	if err := json.Unmarshal([]byte(payload), &c); err != nil {
		b.drop(ControlTopic, "control message is not JSON")
		return
	}
	if c.Origin == b.cfg.ProcessID {
		return
	}
	if c.V != ControlVersion {
		b.warnControl.Warn(slog.Int("v", c.V), slog.String("op", string(c.Op)), slog.String("reason", "unknown version"))
		return
	}
	if _, known := opFields[c.Op]; !known {
		b.warnControl.Warn(slog.Int("v", c.V), slog.String("op", string(c.Op)), slog.String("reason", "unknown op"))
		return
	}
	if err := c.check(); err != nil {
		b.drop(ControlTopic, err.Error())
		return
	}
	b.m.ControlMessages.WithLabelValues(string(c.Op), "received").Inc()
	if b.cfg.ControlFunc != nil {
		b.cfg.ControlFunc(c)
	}
}
