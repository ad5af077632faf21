package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// --- messages search (20-search.md §9.1) ---

// Exit statuses of messages search, which has its own set (20-search.md §9.1).
const (
	searchExitInput = 1 // bad input; nothing was sent
	searchExitRelay = 2 // the relay answered with an error, or could not be reached
	searchExitAuth  = 3 // the relay answered 401 or 403
	searchExitOther = 4 // anything else
)

const (
	searchDefaultLimit = 100
	searchMaxLimit     = 500
	// profileLookupLimit bounds the kind 0 search that resolves a display name.
	profileLookupLimit = 50
	kindProfile        = 0
)

// defaultSearchKinds are the message-like kinds searched without --kinds.
const defaultSearchKinds = "9,40002,40003,45001,45003"

// searchError is a messages search failure with its exit status. A display
// name that resolves to no profile or to several carries the candidates.
type searchError struct {
	code       int
	msg        string
	candidates []profileCandidate
}

func (e *searchError) Error() string { return e.msg }

// errorObject is the {"error":…} line printed on stderr, plus
// "candidates" when a display name did not resolve.
func (e *searchError) errorObject() map[string]any {
	m := map[string]any{"error": e.msg}
	if e.candidates != nil {
		m["candidates"] = e.candidates
	}
	return m
}

func searchFailf(code int, format string, args ...any) error {
	return &searchError{code: code, msg: fmt.Sprintf(format, args...)}
}

// profileCandidate is a profile a display name may mean.
type profileCandidate struct {
	PubKey      string `json:"pubkey"`
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
}

type searchArgs struct {
	common
	query   string
	channel string
	kinds   []int
	since   timeFlag
	until   timeFlag
	limit   int
	prefix  bool
	// author is the hex pubkey of --author given as hex or npub;
	// authorName is --author given as a display name, still to resolve.
	author     string
	authorName string
}

func parseSearch(a *app, args []string) (*searchArgs, error) {
	const cmd = "messages search"
	fs := newFlagSet(cmd)
	var o searchArgs
	var author, kinds string
	o.register(fs, a.getenv)
	fs.StringVar(&o.query, "query", "", "search text (required)")
	fs.StringVar(&author, "author", "", "author: 64 hex, npub1… or a display name")
	fs.StringVar(&o.channel, "channel", "", "channel UUID")
	fs.StringVar(&kinds, "kinds", defaultSearchKinds, "comma-separated kinds")
	fs.Var(&o.since, "since", "oldest created_at, unix seconds or RFC 3339")
	fs.Var(&o.until, "until", "newest created_at, unix seconds or RFC 3339")
	fs.IntVar(&o.limit, "limit", searchDefaultLimit, "at most N events, 1..500")
	fs.BoolVar(&o.prefix, "prefix", false, "prefix (typeahead) mode: the last word matches as a prefix")
	if err := parseOnlyFlags(fs, args); err != nil {
		return nil, err
	}
	if strings.TrimSpace(strings.ReplaceAll(o.query, "\x00", " ")) == "" {
		return nil, usagef("%s: --query is required and must not be empty", cmd)
	}
	if o.limit < 1 || o.limit > searchMaxLimit {
		return nil, usagef("%s: --limit %d is outside 1..%d", cmd, o.limit, searchMaxLimit)
	}
	var err error
	if o.kinds, err = parseKindList(kinds); err != nil {
		return nil, usagef("%s: --kinds: %v", cmd, err)
	}
	if o.channel != "" {
		if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
			return nil, err
		}
	}
	author = strings.TrimSpace(author)
	switch {
	case author == "":
	case len(author) == 64 && event.IsHexAnyCase64(author):
		o.author = strings.ToLower(author)
	case strings.HasPrefix(strings.ToLower(author), "npub1"):
		if o.author, err = npubToHex(author); err != nil {
			return nil, usagef("%s: --author %q: %v", cmd, author, err)
		}
	default:
		o.authorName = author
	}
	return &o, nil
}

// parseKindList parses "9,40002": integers 0..65535, at least one.
func parseKindList(s string) ([]int, error) {
	var kinds []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%q is not a comma-separated list of kinds", s)
		}
		k, err := strconv.Atoi(part)
		if err != nil || k < 0 || k > 65535 {
			return nil, fmt.Errorf("%q is not a kind (an integer 0..65535)", part)
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// filter is the one search filter sent, for the given author pubkey ("" =
// any author).
func (o *searchArgs) filter(author string) event.Filter {
	q, limit := o.query, o.limit
	f := event.Filter{Search: &q, Kinds: o.kinds, Since: o.since.v, Until: o.until.v, Limit: &limit}
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

// resolveAuthor turns a display name into the one pubkey it names.
func resolveAuthor(ctx context.Context, b *bridge, name string) (string, error) {
	raw, err := b.query(ctx, profileFilter(name))
	if err != nil {
		return "", err
	}
	var events []event.Event
	for i, r := range raw {
		ev, err := event.Parse(r)
		if err != nil {
			return "", searchFailf(searchExitRelay, "POST /query: profile %d: %v", i, err)
		}
		events = append(events, ev)
	}
	matches, seen := matchProfiles(events, name)
	switch len(matches) {
	case 1:
		return matches[0].PubKey, nil
	case 0:
		msg := fmt.Sprintf("messages search: --author %q: no profile has that display_name or name", name)
		if len(seen) > 0 {
			msg += "; similar profiles: " + pubkeys(seen)
		}
		return "", &searchError{code: searchExitInput, msg: msg, candidates: seen}
	default:
		return "", &searchError{code: searchExitInput, candidates: matches,
			msg: fmt.Sprintf("messages search: --author %q is ambiguous: %d profiles match: %s", name, len(matches), pubkeys(matches))}
	}
}

// bridge posts one filter at a time to the relay's POST /query with NIP-98.
type bridge struct {
	base string
	sk   []byte
}

// post sends [f] and returns the answer, which must be a JSON array.
// Transport failures and non-2xx answers are searchErrors: 401 and 403
// exit 3, the rest 2.
func (b *bridge) post(ctx context.Context, f event.Filter) ([]byte, error) {
	const op = "POST /query"
	url := b.base + "/query"
	body := append(f.AppendJSON([]byte{'['}), ']')
	auth, err := client.NIP98Header(b.sk, http.MethodPost, url, body)
	if err != nil {
		return nil, searchFailf(searchExitOther, "%s: %v", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, searchFailf(searchExitOther, "%s: %v", op, err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, searchFailf(searchExitRelay, "%s: %v", op, err)
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, client.MaxResponseBytes))
	if err != nil {
		return nil, searchFailf(searchExitRelay, "%s: read answer: %v", op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := strings.TrimSpace(string(ans))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(ans, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		code := searchExitRelay
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			code = searchExitAuth
		}
		return nil, searchFailf(code, "%s: %d: %s", op, resp.StatusCode, msg)
	}
	ans = bytes.TrimSpace(ans)
	if len(ans) == 0 || ans[0] != '[' || !json.Valid(ans) {
		return nil, searchFailf(searchExitRelay, "%s: the answer is not a JSON array", op)
	}
	return ans, nil
}

// query posts f and splits the answer into its elements.
func (b *bridge) query(ctx context.Context, f event.Filter) ([]json.RawMessage, error) {
	ans, err := b.post(ctx, f)
	if err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(ans, &raw); err != nil {
		return nil, searchFailf(searchExitRelay, "POST /query: decode answer: %v", err)
	}
	return raw, nil
}

func runMessagesSearch(ctx context.Context, a *app, args []string) error {
	err := messagesSearch(ctx, a, args)
	var se *searchError
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), errors.As(err, &se):
		return err
	case errors.As(err, &ue):
		return &searchError{code: searchExitInput, msg: ue.msg}
	default:
		return &searchError{code: searchExitOther, msg: err.Error()}
	}
}

// messagesSearch resolves --author when it is a display name, then sends
// the search and prints the relay's JSON array as it came.
func messagesSearch(ctx context.Context, a *app, args []string) error {
	o, err := parseSearch(a, args)
	if err != nil {
		return err
	}
	sk, err := secretKey(a.getenv)
	if err != nil {
		return err
	}
	base, err := httpBase(o.relay)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	b := &bridge{base: base, sk: sk}
	author := o.author
	if o.authorName != "" {
		if author, err = resolveAuthor(ctx, b, o.authorName); err != nil {
			return err
		}
	}
	ans, err := b.post(ctx, o.filter(author))
	if err != nil {
		return err
	}
	if _, err := a.stdout.Write(append(ans, '\n')); err != nil {
		return searchFailf(searchExitOther, "write output: %v", err)
	}
	return nil
}

// --- bech32 (BIP-173) for NIP-19 npub ---

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

// bech32Decode checks a bech32 string (not bech32m) and returns its
// lowercase human-readable part and its data as 5-bit groups, without the
// checksum.
func bech32Decode(s string) (string, []byte, error) {
	if strings.ToLower(s) != s && strings.ToUpper(s) != s {
		return "", nil, errors.New("mixed case")
	}
	s = strings.ToLower(s)
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 || sep+7 > len(s) {
		return "", nil, errors.New("no separator, or too short")
	}
	hrp := s[:sep]
	values := make([]byte, 0, len(hrp)*2+1+len(s)-sep-1)
	for i := 0; i < len(hrp); i++ {
		if hrp[i] < 33 || hrp[i] > 126 {
			return "", nil, errors.New("invalid character in the prefix")
		}
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]&31)
	}
	data := make([]byte, 0, len(s)-sep-1)
	for i := sep + 1; i < len(s); i++ {
		v := strings.IndexByte(bech32Charset, s[i])
		if v < 0 {
			return "", nil, fmt.Errorf("invalid character %q", s[i])
		}
		data = append(data, byte(v))
	}
	if bech32Polymod(append(values, data...)) != 1 {
		return "", nil, errors.New("bad checksum")
	}
	return hrp, data[:len(data)-6], nil
}

// convert5to8 regroups 5-bit groups into bytes; leftover padding must be
// under 5 bits and zero.
func convert5to8(data []byte) ([]byte, error) {
	var acc uint32
	var bits uint
	out := make([]byte, 0, len(data)*5/8)
	for _, v := range data {
		acc = acc<<5 | uint32(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || acc&(1<<bits-1) != 0 {
		return nil, errors.New("invalid padding")
	}
	return out, nil
}

// npubToHex decodes a NIP-19 npub into the 64-hex public key.
func npubToHex(s string) (string, error) {
	hrp, data, err := bech32Decode(s)
	if err != nil {
		return "", fmt.Errorf("not a valid npub: %w", err)
	}
	if hrp != "npub" {
		return "", fmt.Errorf("not an npub (prefix %q)", hrp)
	}
	key, err := convert5to8(data)
	if err != nil {
		return "", fmt.Errorf("not a valid npub: %w", err)
	}
	if len(key) != 32 {
		return "", fmt.Errorf("not a valid npub: %d bytes, want 32", len(key))
	}
	return hex.EncodeToString(key), nil
}
