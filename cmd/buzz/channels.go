package main

import (
	"context"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/event"
)

// Kinds the channel, message and thread commands emit or read (docs/PROTOCOL.md §4.1).
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

// publishedHelp says what a command that publishes one event prints:
// event_id, accepted, message and its own fields.
func publishedHelp(fields string) string {
	return `It prints {"event_id","accepted","message"}
plus ` + fields + `; a refusal (accepted false) exits 1.`
}

func newChannelsCmd(a *app) *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:   "channels",
		Short: "create, list, join and leave channels; manage members",
		Long:  "Channels are NIP-29 groups of the relay, named by a UUID (the h tag).",
		Example: `  buzz channels create --name general
  buzz channels list --get channel_id
  buzz channels add-member --channel <channel-uuid> --pubkey <hex>`,
	},
		newChannelsCreateCmd(a), newChannelsListCmd(a),
		newMemberCmd(a, "join", kindJoinRequest), newMemberCmd(a, "leave", kindLeaveRequest),
		newMemberCmd(a, "add-member", kindPutUser), newMemberCmd(a, "remove-member", kindRemoveUser),
	)
}

// --- channels create ---

type channelCreateArgs struct {
	name    string
	about   string
	id      string
	private bool
	forum   bool
}

func (o *channelCreateArgs) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.name, "name", "", "channel name (required)")
	fs.StringVar(&o.about, "about", "", "channel description")
	fs.StringVar(&o.id, "id", "", "channel UUID (default: a new random one)")
	fs.BoolVar(&o.private, "private", false, "private channel (default open)")
	fs.BoolVar(&o.forum, "forum", false, "forum channel (default stream)")
}

func (o *channelCreateArgs) check(_ *pflag.FlagSet, args []string) error {
	const cmd = "channels create"
	if err := noArgs(cmd, args); err != nil {
		return err
	}
	if strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(o.name), "#")) == "" {
		return cli.Usagef("%s: --name is required", cmd)
	}
	if o.id == "" {
		o.id = uuid.NewString()
		return nil
	}
	id, err := channelID(cmd, "id", o.id)
	if err != nil {
		return err
	}
	o.id = id
	return nil
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

func newChannelsCreateCmd(a *app) *cobra.Command {
	o := &channelCreateArgs{}
	return leaf(&cobra.Command{
		Use:   "create --name NAME [--private] [--forum] [--about TEXT] [--id UUID]",
		Short: "create a channel (kind 9007)",
		Long: "Create publishes a kind 9007; the channel id is --id or a new random UUID.\n" +
			publishedHelp(`"channel_id"`),
		Example: `  ch=$(buzz channels create --name general --get channel_id)
  buzz channels create --name design --private --forum --about "pixels"`,
	}, o, func(c *cobra.Command) error {
		return a.sendOne(c.Context(), o.event(), map[string]any{"channel_id": o.id})
	})
}

// --- channels join / leave / add-member / remove-member ---

type memberArgs struct {
	cmd     string
	kind    int
	channel string
	pubkey  string
	role    string
}

// withTarget reports whether the command names a member (9000, 9001).
func (o *memberArgs) withTarget() bool { return o.kind == kindPutUser || o.kind == kindRemoveUser }

// bind registers --channel, plus --pubkey for add-member and remove-member
// and --role for add-member.
func (o *memberArgs) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.channel, "channel", "", "channel UUID (required)")
	if o.withTarget() {
		fs.StringVar(&o.pubkey, "pubkey", "", "member's pubkey, 64 hex (required; see: buzz whoami)")
	}
	if o.kind == kindPutUser {
		fs.StringVar(&o.role, "role", "", "owner, admin, member, guest or bot (default: member, or the current role)")
	}
}

func (o *memberArgs) check(_ *pflag.FlagSet, args []string) error {
	if err := noArgs(o.cmd, args); err != nil {
		return err
	}
	var err error
	if o.channel, err = channelID(o.cmd, "channel", o.channel); err != nil {
		return err
	}
	if o.withTarget() {
		if o.pubkey, err = hexID(o.cmd, "pubkey", o.pubkey); err != nil {
			return err
		}
	}
	return nil
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

// memberCommands describe join, leave, add-member and remove-member.
var memberCommands = map[int]struct{ use, short, example string }{
	kindJoinRequest: {"join --channel UUID", "join an open channel, or ask to join (kind 9021)",
		"  buzz channels join --channel <channel-uuid>"},
	kindLeaveRequest: {"leave --channel UUID", "leave a channel (kind 9022)",
		"  buzz channels leave --channel <channel-uuid>"},
	kindPutUser: {"add-member --channel UUID --pubkey HEX [--role ROLE]", "add a member or change a role (kind 9000)",
		"  buzz channels add-member --channel <channel-uuid> --pubkey <hex> --role admin"},
	kindRemoveUser: {"remove-member --channel UUID --pubkey HEX", "remove a member (kind 9001)",
		"  buzz channels remove-member --channel <channel-uuid> --pubkey <hex>"},
}

func newMemberCmd(a *app, name string, kind int) *cobra.Command {
	o := &memberArgs{cmd: "channels " + name, kind: kind}
	d := memberCommands[kind]
	fields := `"channel_id"`
	if o.withTarget() {
		fields += ` and "pubkey"`
	}
	return leaf(&cobra.Command{
		Use:     d.use,
		Short:   d.short,
		Long:    "The " + name + " command publishes the membership event of its kind.\n" + publishedHelp(fields),
		Example: d.example,
	}, o, func(c *cobra.Command) error { return a.sendOne(c.Context(), o.event(), o.fields()) })
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

// channelFromMetadata reads a relay-signed 39000 (docs/PROTOCOL.md §5.4).
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

// newestChannels keeps the newest 39000 of each channel, sorted by name
// (any case), then id.
func newestChannels(events []event.Event) []channelInfo {
	seen := map[string]int{} // channel → index in list
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
	return list
}

type noFlags struct{ cmd string }

func (o *noFlags) bind(*pflag.FlagSet) {}

func (o *noFlags) check(_ *pflag.FlagSet, args []string) error { return noArgs(o.cmd, args) }

func newChannelsListCmd(a *app) *cobra.Command {
	return leaf(&cobra.Command{
		Use:   "list",
		Short: "list the channels you can read (kind 39000)",
		Long: `List reads the relay's kind 39000 channel metadata and prints one line per
channel: {"channel_id","name","visibility","type","about","topic","archived"},
sorted by name.`,
		Example: `  buzz channels list
  buzz channels list --get channel_id`,
	}, &noFlags{cmd: "channels list"}, func(c *cobra.Command) error { return a.listChannels(c.Context()) })
}

func (a *app) listChannels(ctx context.Context) error {
	return a.withRelay(ctx, func(ctx context.Context, rc relayClient, _ []byte) error {
		events, err := rc.Query(ctx, event.Filter{Kinds: []int{kindGroupMetadata}})
		if err != nil {
			return err
		}
		for _, ci := range newestChannels(events) {
			if err := a.write(ci); err != nil {
				return err
			}
		}
		return nil
	})
}
