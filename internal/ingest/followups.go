package ingest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// notice is a 44100/44101 membership notification to send.
type notice struct {
	kind   int
	target string
}

// noticeContent is the content of a 44100/44101, fields in wire order.
type noticeContent struct {
	Type      string `json:"type"`
	ChannelID string `json:"channel_id"`
	Actor     string `json:"actor"`
}

// followUps builds, signs and stores the relay-signed events of
// docs/PROTOCOL.md §5.4 for the channel's new state (39000–39002 when state is set) and the
// notices, inside the transaction. Each run builds new events.
func (w writer) followUps(ctx context.Context, channel string, state bool, notices []notice) ([]*event.Event, error) {
	if !state && len(notices) == 0 {
		return nil, nil
	}
	cid, s := w.cid(), w.store()
	relayPub := event.PubKey(w.p.cfg.RelayKey)
	var out []*event.Event
	if state {
		ch, _, err := s.ChannelLock(ctx, cid, channel)
		if err != nil {
			return nil, fmt.Errorf("follow-ups: lock channel: %w", err)
		}
		members, err := s.ChannelMembers(ctx, cid, channel)
		if err != nil {
			return nil, fmt.Errorf("follow-ups: members: %w", err)
		}
		for _, kind := range []int{event.KindGroupMetadata, event.KindGroupAdmins, event.KindGroupMembers} {
			out = append(out, &event.Event{Kind: kind, Tags: stateTags(kind, ch, members), Content: ""})
		}
	}
	for _, n := range notices {
		typ := "member_added"
		if n.kind == event.KindMemberRemoved {
			typ = "member_removed"
		}
		// A struct, not a map: the fields keep the order of docs/PROTOCOL.md §5.4.
		content, _ := json.Marshal(noticeContent{Type: typ, ChannelID: channel, Actor: w.ev().PubKey})
		out = append(out, &event.Event{Kind: n.kind, Tags: event.Tags{{"p", n.target}, {"h", channel}}, Content: string(content)})
	}
	last := map[int]int64{}
	for _, fe := range out {
		global := isNotice(fe.Kind)
		prev, ok := last[fe.Kind]
		if !ok {
			var err error
			if prev, err = s.LatestSignedAt(ctx, cid, fe.Kind, relayPub, channel, global); err != nil {
				return nil, fmt.Errorf("follow-up %d: latest created_at: %w", fe.Kind, err)
			}
		}
		fe.CreatedAt = max(w.p.cfg.NowFunc().Unix(), prev+1)
		last[fe.Kind] = fe.CreatedAt
		if err := w.p.sign(fe); err != nil {
			return nil, fmt.Errorf("follow-up %d: sign: %w", fe.Kind, err)
		}
		fchannel := channel
		var dTag *string
		if global {
			fchannel = ""
		} else {
			d := channel
			dTag = &d
			if err := s.ReplaceableSupersede(ctx, store.ReplaceableKey{CommunityID: cid, Kind: fe.Kind, Pubkey: relayPub, DTag: dTag}); err != nil {
				return nil, fmt.Errorf("follow-up %d: supersede: %w", fe.Kind, err)
			}
		}
		if _, err := s.EventInsert(ctx, store.EventInsertParams{CommunityID: cid, Event: fe, Channel: fchannel, DTag: dTag}); err != nil {
			return nil, fmt.Errorf("follow-up %d: %w", fe.Kind, err)
		}
	}
	return out, nil
}

// isNotice reports whether a follow-up is a global, p-gated 44100/44101
// rather than one of the channel's addressable 39000–39002.
func isNotice(kind int) bool { return kind == event.KindMemberAdded || kind == event.KindMemberRemoved }

// sign signs a relay follow-up through Config.SignFunc.
func (p *Pipeline) sign(ev *event.Event) error {
	return p.cfg.SignFunc(ev)
}

// stateTags lays out 39000/39001/39002 exactly as docs/PROTOCOL.md §5.4 lists them.
func stateTags(kind int, ch store.Channel, members []store.Member) event.Tags {
	tags := event.Tags{{"d", ch.ID}}
	switch kind {
	case event.KindGroupMetadata:
		tags = append(tags, event.Tag{"name", ch.Name})
		if ch.Description != "" {
			tags = append(tags, event.Tag{"about", ch.Description})
		}
		if ch.Visibility == "private" {
			tags = append(tags, event.Tag{"private"})
		} else {
			tags = append(tags, event.Tag{"public"})
		}
		tags = append(tags, event.Tag{"closed"}, event.Tag{"t", ch.Type})
		if ch.Topic != "" {
			tags = append(tags, event.Tag{"topic", ch.Topic})
		}
		if ch.Purpose != "" {
			tags = append(tags, event.Tag{"purpose", ch.Purpose})
		}
		if ch.Archived {
			tags = append(tags, event.Tag{"archived", "true"})
		}
	case event.KindGroupAdmins:
		for _, m := range members {
			if elevated(m.Role) {
				tags = append(tags, event.Tag{"p", m.Pubkey, m.Role})
			}
		}
	case event.KindGroupMembers:
		for _, m := range members {
			tags = append(tags, event.Tag{"p", m.Pubkey, "", m.Role})
		}
	}
	return tags
}
