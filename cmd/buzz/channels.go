package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// Kinds the channel, message and thread commands emit or read (10-relay-core §4.1).
const (
	kindDeletion      = 5
	kindReaction      = 7
	kindMessage       = 9
	kindPutUser       = 9000
	kindRemoveUser    = 9001
	kindCreateGroup   = 9007
	kindJoinRequest   = 9021
	kindLeaveRequest  = 9022
	kindMessageV2     = 40002
	kindMessageEdit   = 40003
	kindGroupMetadata = 39000
)

// subcommand groups: buzz channels …, buzz messages …, buzz threads ….
var (
	channelCommands = map[string]command{
		"create":        {"create a channel (kind 9007)", runChannelsCreate},
		"list":          {"list the channels you can read (kind 39000)", runChannelsList},
		"join":          {"join an open channel (kind 9021)", runChannelsJoin},
		"leave":         {"leave a channel (kind 9022)", runChannelsLeave},
		"add-member":    {"add a member or change a role (kind 9000)", runChannelsAddMember},
		"remove-member": {"remove a member (kind 9001)", runChannelsRemoveMember},
	}
	messageCommands = map[string]command{
		"send":   {"post a message or a thread reply (kind 9)", runMessagesSend},
		"list":   {"print a channel's messages (kinds 9, 40002)", runMessagesList},
		"react":  {"react to an event (kind 7)", runMessagesReact},
		"edit":   {"edit one of your messages (kind 40003)", runMessagesEdit},
		"delete": {"delete one of your events (kind 5)", runMessagesDelete},
		"search": {"search messages (NIP-50, over the HTTP bridge)", runMessagesSearch},
	}
	threadCommands = map[string]command{
		"get": {"print a thread: the root, then its replies oldest first", runThreadsGet},
	}
)

func runChannels(ctx context.Context, a *app, args []string) error {
	return dispatch(ctx, a, "channels", channelCommands, args)
}

func runMessages(ctx context.Context, a *app, args []string) error {
	return dispatch(ctx, a, "messages", messageCommands, args)
}

func runThreads(ctx context.Context, a *app, args []string) error {
	return dispatch(ctx, a, "threads", threadCommands, args)
}

// dispatch runs the subcommand args[0] of group; "help", -h and --help print
// the group's subcommands.
func dispatch(ctx context.Context, a *app, group string, subs map[string]command, args []string) error {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 {
		return usagef("%s: missing subcommand (one of: %s; see buzz help)", group, strings.Join(names, ", "))
	}
	switch args[0] {
	case "help", "-h", "--help":
		var b strings.Builder
		fmt.Fprintf(&b, "buzz %s <subcommand> [flags]   (flags and usage: buzz help)\n\n", group)
		for _, n := range names {
			fmt.Fprintf(&b, "  %-14s %s\n", n, subs[n].summary)
		}
		_, err := fmt.Fprint(a.stdout, b.String())
		return err
	}
	sub, ok := subs[args[0]]
	if !ok {
		return usagef("%s: unknown subcommand %q (one of: %s)", group, args[0], strings.Join(names, ", "))
	}
	return sub.run(ctx, a, args[1:])
}

// parseOnlyFlags parses args and refuses positional arguments.
func parseOnlyFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), pos[0])
	}
	return nil
}

// channelID checks a --channel/--id value: a UUID, returned lowercase.
func channelID(cmd, flagName, v string) (string, error) {
	if v == "" {
		return "", usagef("%s: --%s is required (a channel UUID)", cmd, flagName)
	}
	u, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		return "", usagef("%s: --%s %q is not a hyphenated UUID", cmd, flagName, v)
	}
	return u.String(), nil
}

// hexID checks an event id or pubkey flag: 64 hex, returned lowercase.
func hexID(cmd, flagName, v string) (string, error) {
	if v == "" {
		return "", usagef("%s: --%s is required (64 hex)", cmd, flagName)
	}
	if !event.IsHexAnyCase64(v) {
		return "", usagef("%s: --%s %q is not 64 hex characters", cmd, flagName, v)
	}
	return strings.ToLower(v), nil
}

// withRelay reads the key, opens the door c selects under c.timeout and
// runs fn on it.
func withRelay(ctx context.Context, a *app, c *common, fn func(ctx context.Context, rc relayClient, sk []byte) error) error {
	sk, err := secretKey(a.getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rc, release, err := connect(ctx, c, sk)
	if err != nil {
		return err
	}
	defer release()
	return fn(ctx, rc, sk)
}

// publishReport signs ev (created now), publishes it and prints fields plus
// event_id, accepted and message; a refusal exits 1.
func publishReport(ctx context.Context, a *app, rc relayClient, sk []byte, ev event.Event, fields map[string]any) error {
	if ev.CreatedAt == 0 {
		ev.CreatedAt = time.Now().Unix()
	}
	if ev.Tags == nil {
		ev.Tags = event.Tags{}
	}
	if err := ev.Sign(sk); err != nil {
		return err
	}
	accepted, msg, err := rc.Publish(ctx, ev)
	if err != nil {
		return err
	}
	out := map[string]any{"event_id": ev.ID, "accepted": accepted, "message": msg}
	for k, v := range fields {
		out[k] = v
	}
	if err := writeJSON(a.stdout, out); err != nil {
		return err
	}
	if !accepted {
		return errRefused
	}
	return nil
}

// sendOne is the run of a command that publishes a single event.
func sendOne(ctx context.Context, a *app, c *common, ev event.Event, fields map[string]any) error {
	return withRelay(ctx, a, c, func(ctx context.Context, rc relayClient, sk []byte) error {
		return publishReport(ctx, a, rc, sk, ev, fields)
	})
}

// --- channels create ---

type channelCreateArgs struct {
	common
	name    string
	about   string
	id      string
	private bool
	forum   bool
}

func parseChannelCreate(a *app, args []string) (*channelCreateArgs, error) {
	const cmd = "channels create"
	fs := newFlagSet(cmd)
	var o channelCreateArgs
	o.register(fs, a.getenv)
	fs.StringVar(&o.name, "name", "", "channel name (required)")
	fs.StringVar(&o.about, "about", "", "channel description")
	fs.StringVar(&o.id, "id", "", "channel UUID (default: a new random one)")
	fs.BoolVar(&o.private, "private", false, "private channel (default open)")
	fs.BoolVar(&o.forum, "forum", false, "forum channel (default stream)")
	if err := parseOnlyFlags(fs, args); err != nil {
		return nil, err
	}
	if strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(o.name), "#")) == "" {
		return nil, usagef("%s: --name is required", cmd)
	}
	if o.id == "" {
		o.id = uuid.NewString()
	} else {
		id, err := channelID(cmd, "id", o.id)
		if err != nil {
			return nil, err
		}
		o.id = id
	}
	return &o, nil
}

// event is the 9007: name, visibility, channel_type, about (when given), h.
func (o *channelCreateArgs) event() event.Event {
	vis, typ := "open", "stream"
	if o.private {
		vis = "private"
	}
	if o.forum {
		typ = "forum"
	}
	tags := event.Tags{{"name", o.name}, {"visibility", vis}, {"channel_type", typ}}
	if o.about != "" {
		tags = append(tags, event.Tag{"about", o.about})
	}
	tags = append(tags, event.Tag{"h", o.id})
	return event.Event{Kind: kindCreateGroup, Tags: tags}
}

func runChannelsCreate(ctx context.Context, a *app, args []string) error {
	o, err := parseChannelCreate(a, args)
	if err != nil {
		return err
	}
	return sendOne(ctx, a, &o.common, o.event(), map[string]any{"channel_id": o.id})
}

// --- channels join / leave / add-member / remove-member ---

type memberArgs struct {
	common
	kind    int
	channel string
	pubkey  string
	role    string
}

// parseMember parses the flags of join, leave (kind 9021/9022: --channel)
// and add-member, remove-member (9000/9001: also --pubkey; 9000: --role).
func parseMember(a *app, cmd string, kind int, args []string) (*memberArgs, error) {
	fs := newFlagSet(cmd)
	o := memberArgs{kind: kind}
	o.register(fs, a.getenv)
	fs.StringVar(&o.channel, "channel", "", "channel UUID (required)")
	withTarget := kind == kindPutUser || kind == kindRemoveUser
	if withTarget {
		fs.StringVar(&o.pubkey, "pubkey", "", "member's pubkey, 64 hex (required)")
	}
	if kind == kindPutUser {
		fs.StringVar(&o.role, "role", "", "owner, admin, member, guest or bot (default: member, or the current role)")
	}
	if err := parseOnlyFlags(fs, args); err != nil {
		return nil, err
	}
	var err error
	if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
		return nil, err
	}
	if withTarget {
		if o.pubkey, err = hexID(cmd, "pubkey", o.pubkey); err != nil {
			return nil, err
		}
	}
	return &o, nil
}

// event is the membership event: h, then p and role when they apply.
func (o *memberArgs) event() event.Event {
	tags := event.Tags{{"h", o.channel}}
	if o.pubkey != "" {
		tags = append(tags, event.Tag{"p", o.pubkey})
	}
	if o.role != "" {
		tags = append(tags, event.Tag{"role", o.role})
	}
	return event.Event{Kind: o.kind, Tags: tags}
}

func (o *memberArgs) fields() map[string]any {
	f := map[string]any{"channel_id": o.channel}
	if o.pubkey != "" {
		f["pubkey"] = o.pubkey
	}
	return f
}

func memberCommand(cmd string, kind int) func(context.Context, *app, []string) error {
	return func(ctx context.Context, a *app, args []string) error {
		o, err := parseMember(a, cmd, kind, args)
		if err != nil {
			return err
		}
		return sendOne(ctx, a, &o.common, o.event(), o.fields())
	}
}

func runChannelsJoin(ctx context.Context, a *app, args []string) error {
	return memberCommand("channels join", kindJoinRequest)(ctx, a, args)
}

func runChannelsLeave(ctx context.Context, a *app, args []string) error {
	return memberCommand("channels leave", kindLeaveRequest)(ctx, a, args)
}

func runChannelsAddMember(ctx context.Context, a *app, args []string) error {
	return memberCommand("channels add-member", kindPutUser)(ctx, a, args)
}

func runChannelsRemoveMember(ctx context.Context, a *app, args []string) error {
	return memberCommand("channels remove-member", kindRemoveUser)(ctx, a, args)
}

// --- channels list ---

// channelInfo is one line of channels list, read from a 39000.
type channelInfo struct {
	ChannelID  string `json:"channel_id"`
	Name       string `json:"name"`
	Visibility string `json:"visibility"`
	Type       string `json:"type"`
	About      string `json:"about"`
	Topic      string `json:"topic"`
	Archived   bool   `json:"archived"`
}

// channelFromMetadata reads a relay-signed 39000 (10-relay-core §5.4).
func channelFromMetadata(ev event.Event) (channelInfo, bool) {
	c := channelInfo{Visibility: "open", Type: "stream"}
	for _, t := range ev.Tags {
		switch t.Name() {
		case "d":
			c.ChannelID = t.Value()
		case "name":
			c.Name = t.Value()
		case "about":
			c.About = t.Value()
		case "private":
			c.Visibility = "private"
		case "public":
			c.Visibility = "open"
		case "t":
			if v := t.Value(); v != "" {
				c.Type = v
			}
		case "topic":
			c.Topic = t.Value()
		case "archived":
			c.Archived = t.Value() == "true"
		}
	}
	return c, ev.Kind == kindGroupMetadata && c.ChannelID != ""
}

func runChannelsList(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("channels list")
	var c common
	c.register(fs, a.getenv)
	if err := parseOnlyFlags(fs, args); err != nil {
		return err
	}
	return withRelay(ctx, a, &c, func(ctx context.Context, rc relayClient, _ []byte) error {
		events, err := rc.Query(ctx, event.Filter{Kinds: []int{kindGroupMetadata}})
		if err != nil {
			return err
		}
		seen := map[string]int{} // channel → index in list; the newest 39000 wins
		var list []channelInfo
		var at []int64
		for _, ev := range events {
			ci, ok := channelFromMetadata(ev)
			if !ok {
				continue
			}
			if i, dup := seen[ci.ChannelID]; dup {
				if ev.CreatedAt > at[i] {
					list[i], at[i] = ci, ev.CreatedAt
				}
				continue
			}
			seen[ci.ChannelID] = len(list)
			list = append(list, ci)
			at = append(at, ev.CreatedAt)
		}
		slices.SortStableFunc(list, func(x, y channelInfo) int {
			if c := strings.Compare(strings.ToLower(x.Name), strings.ToLower(y.Name)); c != 0 {
				return c
			}
			return strings.Compare(x.ChannelID, y.ChannelID)
		})
		for _, ci := range list {
			if err := writeJSON(a.stdout, ci); err != nil {
				return err
			}
		}
		return nil
	})
}

// errNotFound is a lookup that found nothing: a refusal (exit 1).
func errNotFound(op, what string) error {
	return &client.RefusedError{Op: op, Message: what + " not found"}
}
