package ingest

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// groupKinds are the NIP-29 commands of docs/PROTOCOL.md §5; their state change
// commits with the event under the channel row's lock.
var groupKinds = event.KindSet{9000: {}, 9001: {}, 9002: {}, 9005: {}, 9007: {}, 9008: {}, 9021: {}, 9022: {}}

var validRoles = map[string]bool{"owner": true, "admin": true, "member": true, "guest": true, "bot": true}

func elevated(role string) bool { return role == "owner" || role == "admin" }

// groupFamily is the NIP-29 commands (step 16) in two halves: the shape of
// the tags is checked here, outside the transaction; the rules that depend
// on the channel's state run in apply after SELECT … FOR UPDATE on the
// channel row (groupapply.go), followed by the relay-signed 39000–39002 and
// 44100/44101 (followups.go).
type groupFamily struct{ byTag }

// groupCommand is what a NIP-29 command asks for, read from its tags.
type groupCommand struct {
	name, visibility, channelType, about string // 9007
	target, role                         string // 9000, 9001
	hasRole                              bool
	meta                                 store.ChannelUpdateParams // 9002; apply sets its keys on a copy
	metaElevated                         bool                      // 9002 touches name/about/archived/visibility/ttl
	unarchive                            bool
	targetEvent                          string // 9005
}

// groupChange is a checked command for one channel.
type groupChange struct {
	// channel is the command's channel; a 9007 without an h tag gets a
	// fresh id here, so a retried apply creates the same channel.
	channel string
	// chosen is set when the client chose the id of the channel a 9007
	// creates.
	chosen bool
	cmd    groupCommand
}

// canonicalName strips leading '#' and whitespace and trailing whitespace.
func canonicalName(s string) string {
	s = strings.TrimLeftFunc(s, func(r rune) bool { return r == '#' || unicode.IsSpace(r) })
	return strings.TrimRightFunc(s, unicode.IsSpace)
}

// authorize runs the stateless part of step 16: tags and values.
func (groupFamily) authorize(ctx context.Context, p *Pipeline, req *Request, rt route) (change, error) {
	ev := &req.Event
	c := groupChange{channel: rt.channel, chosen: rt.channel != ""}
	g := &c.cmd
	switch ev.Kind {
	case event.KindCreateGroup:
		t := ev.Tags.First("name")
		g.name = canonicalName(t.Value())
		if g.name == "" {
			return nil, invalid("channel name is required")
		}
		if utf8.RuneCountInString(g.name) > 255 {
			return nil, invalid("channel name exceeds 255 characters")
		}
		g.visibility = "open"
		if t := ev.Tags.First("visibility"); t != nil {
			if v := t.Value(); v == "open" || v == "private" {
				g.visibility = v
			} else {
				return nil, &refusal{Result{Code: Rejected, Message: "invalid visibility: " + v}}
			}
		}
		g.channelType = "stream"
		if t := ev.Tags.First("channel_type"); t != nil {
			if v := t.Value(); v == "stream" || v == "forum" {
				g.channelType = v
			} else {
				return nil, &refusal{Result{Code: Rejected, Message: "invalid channel_type: " + v}}
			}
		}
		g.about = ev.Tags.First("about").Value()
		if c.channel == "" {
			c.channel = uuid.NewString()
		}
		if err := p.admit(ctx, req, admission.ChannelCreates); err != nil {
			return nil, err
		}
	case event.KindPutUser, event.KindRemoveUser:
		p := ev.Tags.First("p")
		if p == nil || !event.IsHexAnyCase64(p.Value()) {
			return nil, invalid("missing p tag")
		}
		g.target = strings.ToLower(p.Value())
		if ev.Kind == event.KindPutUser {
			if t := ev.Tags.First("role"); t != nil {
				if !validRoles[t.Value()] {
					return nil, invalid("invalid role: %s", t.Value())
				}
				g.role, g.hasRole = t.Value(), true
			}
		}
	case event.KindJoinRequest:
		if c.channel == "" {
			return nil, invalid("join request must include an h tag")
		}
	case event.KindEditMetadata:
		if err := checkMetadata(ev, g); err != nil {
			return nil, err
		}
	case event.KindDeleteEvent:
		e := ev.Tags.First("e")
		if e == nil {
			return nil, invalid("missing e tag for target event")
		}
		if !event.IsHexAnyCase64(e.Value()) {
			return nil, invalid("malformed deletion target id")
		}
		g.targetEvent = strings.ToLower(e.Value())
	}
	return c, nil
}

func checkMetadata(ev *event.Event, g *groupCommand) error {
	found := false
	for _, name := range []string{"name", "about", "archived", "topic", "purpose", "visibility", "ttl"} {
		if ev.Tags.First(name) != nil {
			found = true
		}
	}
	if !found {
		return invalid("kind:9002 must include at least one metadata tag (name, about, archived, topic, purpose, visibility, ttl)")
	}
	if t := ev.Tags.First("name"); t != nil {
		n := canonicalName(t.Value())
		if n == "" {
			return invalid("channel name is required")
		}
		if utf8.RuneCountInString(n) > 255 {
			return invalid("channel name exceeds 255 characters")
		}
		g.meta.Name, g.metaElevated = &n, true
	}
	if t := ev.Tags.First("about"); t != nil {
		v := t.Value()
		g.meta.Description, g.metaElevated = &v, true
	}
	if t := ev.Tags.First("topic"); t != nil {
		v := t.Value()
		g.meta.Topic = &v
	}
	if t := ev.Tags.First("purpose"); t != nil {
		v := t.Value()
		g.meta.Purpose = &v
	}
	if t := ev.Tags.First("visibility"); t != nil {
		if len(t) < 2 {
			return invalid("visibility tag must have a value")
		}
		if v := t[1]; v != "open" && v != "private" {
			return invalid(`invalid visibility value: %s (must be "open" or "private")`, v)
		}
		v := t[1]
		g.meta.Visibility, g.metaElevated = &v, true
	}
	if t := ev.Tags.First("archived"); t != nil {
		if len(t) < 2 {
			return invalid("archived tag must have a value")
		}
		if v := t[1]; v != "true" && v != "false" {
			return invalid(`invalid archived value: %s (must be "true" or "false")`, v)
		}
		a := t[1] == "true"
		g.meta.Archived, g.metaElevated, g.unarchive = &a, true, !a
	}
	if ev.Tags.First("ttl") != nil {
		g.metaElevated = true
	}
	return nil
}
