package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// --- messages search (docs/PROTOCOL.md §12.10) ---
//
// Its exit statuses are those of every buzz command (see exitStatus), with
// no separate set of its own, and it prints one event per line in
// the relay's rank order instead of the answer's JSON array.

const (
	searchDefaultLimit = 100
	searchMaxLimit     = 500
	// profileLookupLimit bounds the kind 0 search that resolves a display name.
	profileLookupLimit = 50
	kindProfile        = 0
)

// defaultSearchKinds are the message-like kinds searched without --kinds.
var defaultSearchKinds = []int{9, 40002, 40003, 45001, 45003}

// profileCandidate is a profile a display name may mean.
type profileCandidate struct {
	PubKey      string `json:"pubkey"`
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
}

type searchArgs struct {
	query   string
	channel string
	kinds   kindsFlag
	since   timeFlag
	until   timeFlag
	limit   int
	prefix  bool
	author  string // --author as given
	// authorHex is the pubkey of --author given as hex or npub; authorName
	// is --author given as a display name, still to resolve.
	authorHex  string
	authorName string
}

func (o *searchArgs) bind(fs *pflag.FlagSet) {
	o.kinds.kinds = slices.Clone(defaultSearchKinds)
	fs.StringVar(&o.query, "query", "", "search text (required)")
	fs.StringVar(&o.author, "author", "", "author: 64 hex, npub1… or a display name")
	fs.StringVar(&o.channel, "channel", "", "channel UUID")
	fs.Var(&o.kinds, "kinds", "comma-separated kinds")
	fs.Var(&o.since, "since", "oldest created_at, unix seconds or RFC 3339")
	fs.Var(&o.until, "until", "newest created_at, unix seconds or RFC 3339")
	fs.IntVar(&o.limit, "limit", searchDefaultLimit, fmt.Sprintf("at most N events, 1..%d", searchMaxLimit))
	fs.BoolVar(&o.prefix, "prefix", false, "prefix (typeahead) mode: the last word matches as a prefix")
}

// check refuses bad input before any request is sent.
func (o *searchArgs) check(_ *pflag.FlagSet, args []string) error {
	const cmd = "messages search"
	if err := noArgs(cmd, args); err != nil {
		return err
	}
	if strings.TrimSpace(strings.ReplaceAll(o.query, "\x00", " ")) == "" {
		return cli.Usagef("%s: --query is required and must not be empty", cmd)
	}
	if o.limit < 1 || o.limit > searchMaxLimit {
		return cli.Usagef("%s: --limit %d is outside 1..%d", cmd, o.limit, searchMaxLimit)
	}
	var err error
	if o.channel != "" {
		if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
			return err
		}
	}
	author := strings.TrimSpace(o.author)
	switch {
	case author == "":
	case event.IsHexAnyCase64(author):
		o.authorHex = strings.ToLower(author)
	case strings.HasPrefix(strings.ToLower(author), "npub1"):
		if o.authorHex, err = cli.ParseNPub(author); err != nil {
			return cli.Usagef("%s: --author %q: %v", cmd, author, err)
		}
	default:
		o.authorName = author
	}
	return nil
}

// filter is the one search filter sent, for the given author pubkey ("" =
// any author).
func (o *searchArgs) filter(author string) event.Filter {
	q, limit := o.query, o.limit
	f := event.Filter{Search: &q, Kinds: o.kinds.kinds, Since: o.since.v, Until: o.until.v, Limit: &limit}
	if author != "" {
		f.Authors = []string{author}
	}
	if o.channel != "" {
		f.Tags = map[string][]string{"h": {o.channel}}
	}
	if o.prefix {
		f.Extra = map[string]json.RawMessage{"search_mode": json.RawMessage(`"prefix"`)}
	}
	return f
}

// profileFilter is the kind 0 prefix search that resolves a display name.
func profileFilter(name string) event.Filter {
	limit := profileLookupLimit
	return event.Filter{Kinds: []int{kindProfile}, Search: &name, Limit: &limit,
		Extra: map[string]json.RawMessage{"search_mode": json.RawMessage(`"prefix"`)}}
}

// matchProfiles returns the pubkeys whose newest profile in events has a
// display_name or name equal to name ignoring case, and every profile seen
// (one per pubkey), both sorted by pubkey.
func matchProfiles(events []event.Event, name string) (matches, seen []profileCandidate) {
	newest := map[string]event.Event{}
	for _, ev := range events {
		if ev.Kind != kindProfile {
			continue
		}
		if cur, ok := newest[ev.PubKey]; !ok || ev.CreatedAt > cur.CreatedAt ||
			(ev.CreatedAt == cur.CreatedAt && ev.ID < cur.ID) {
			newest[ev.PubKey] = ev
		}
	}
	seen, matches = []profileCandidate{}, []profileCandidate{}
	for pk, ev := range newest {
		var content map[string]any
		_ = json.Unmarshal([]byte(ev.Content), &content)
		c := profileCandidate{PubKey: pk}
		c.Name, _ = content["name"].(string)
		c.DisplayName, _ = content["display_name"].(string)
		seen = append(seen, c)
		if (c.DisplayName != "" && strings.EqualFold(c.DisplayName, name)) || (c.Name != "" && strings.EqualFold(c.Name, name)) {
			matches = append(matches, c)
		}
	}
	byPubKey := func(x, y profileCandidate) int { return strings.Compare(x.PubKey, y.PubKey) }
	slices.SortFunc(seen, byPubKey)
	slices.SortFunc(matches, byPubKey)
	return matches, seen
}

func pubkeys(cs []profileCandidate) string {
	pks := make([]string, len(cs))
	for i, c := range cs {
		pks[i] = c.PubKey
	}
	return strings.Join(pks, ", ")
}

// resolveAuthor turns a display name into the one pubkey it names. None,
// or several, is a refusal (exit 1) carrying the "candidates".
func resolveAuthor(ctx context.Context, b *client.HTTP, name string) (string, error) {
	events, err := b.Query(ctx, profileFilter(name))
	if err != nil {
		return "", err
	}
	matches, seen := matchProfiles(events, name)
	switch len(matches) {
	case 1:
		return matches[0].PubKey, nil
	case 0:
		msg := fmt.Sprintf("--author %q: no profile has that display_name or name", name)
		if len(seen) > 0 {
			msg += "; similar profiles: " + pubkeys(seen)
		}
		return "", unresolved(msg, seen)
	default:
		return "", unresolved(fmt.Sprintf("--author %q is ambiguous: %d profiles match: %s", name, len(matches), pubkeys(matches)), matches)
	}
}

// unresolved is a display name that names no single profile.
func unresolved(msg string, candidates []profileCandidate) error {
	return &detailError{err: &client.RefusedError{Op: "messages search", Message: msg},
		fields: map[string]any{"candidates": candidates}}
}

func newSearchCmd(a *app) *cobra.Command {
	o := &searchArgs{}
	return leaf(&cobra.Command{
		Use:   "search --query TEXT [--author HEX|npub|NAME] [--channel UUID] [--kinds K,K] [--since T] [--until T] [--limit N] [--prefix]",
		Short: "search messages (NIP-50, over the HTTP bridge)",
		Long: `Search sends one POST /query (always the HTTP bridge, whatever --http says)
with one search filter, and prints the events one per line in the relay's
rank order.

--kinds defaults to 9,40002,40003,45001,45003; --limit is 1..500 (default
100); --prefix matches the last word as a prefix. --author takes 64 hex,
an npub, or a display name: a name is resolved by a kind 0 search to the
one profile whose display_name or name equals it (any case); none or
several is a refusal (exit 1) whose error carries the "candidates".
Bad input exits 2 before any request is sent.`,
		Example: `  buzz messages search --query checkout --limit 20
  buzz messages search --author Aaron --query checkout --channel <channel-uuid>
  buzz messages search --query "proj pl" --prefix --get id`,
	}, o, func(c *cobra.Command) error { return o.run(c.Context(), a) })
}

// run resolves --author when it is a display name, then sends the search
// and prints the events in the order the relay ranked them.
func (o *searchArgs) run(ctx context.Context, a *app) error {
	sk, err := secretKey(a.getenv, "messages search")
	if err != nil {
		return err
	}
	b, err := a.bridge(sk)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.global.timeout)
	defer cancel()
	author := o.authorHex
	if o.authorName != "" {
		if author, err = resolveAuthor(ctx, b, o.authorName); err != nil {
			return err
		}
	}
	events, err := b.Query(ctx, o.filter(author))
	if err != nil {
		return err
	}
	return a.writeEvents(events)
}
