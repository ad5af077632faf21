package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/event"
)

// The filter keys buzz sends, in one place. A key outside both lists is
// refused before anything is sent, so that a typo ("kindz") never reaches
// the relay as a filter that matches everything.
var (
	// knownKeys are NIP-01's and NIP-50's keys, taken by every door; the
	// tag keys "#<name>" are the others.
	knownKeys = "ids, authors, kinds, since, until, limit, search, #<tag>"

	// bridgeKeys are the HTTP bridge's extension fields, following
	// docs/PROTOCOL.md §8.4 (before_id; the legacy thread read's depth_limit and cursors),
	// its search extensions (docs/PROTOCOL.md §12.7: search_mode, page and their other
	// spellings) and docs/NIP-CW.md (channel and thread windows). The WebSocket
	// knows none of them, so they are accepted only with --http.
	bridgeKeys = map[string]bool{
		"before_id": true, "depth_limit": true,
		"thread_cursor": true, "threadCursor": true, "thread_cursor_id": true, "threadCursorId": true,
		"search_mode": true, "searchMode": true, "page": true, "search_page": true, "searchPage": true,
		"top_level": true, "resolve_thread_roots": true, "include_aux": true, "include_summaries": true,
		"thread_window": true,
	}
)

// checkFilterKeys refuses a filter key that is neither known nor, with
// --http, a bridge field. Filters are numbered from 1 in the order given.
func checkFilterKeys(cmd string, filters []event.Filter, http bool) error {
	for i, f := range filters {
		keys := make([]string, 0, len(f.Extra))
		for k := range f.Extra { // ParseFilter leaves every other key here
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch {
			case !bridgeKeys[k]:
				return cli.Usagef("%s: filter %d: unknown key %q (known: %s; with --http also the bridge fields)", cmd, i+1, k, knownKeys)
			case !http:
				return cli.Usagef("%s: filter %d: %q is an HTTP bridge field: add --http", cmd, i+1, k)
			}
		}
	}
	return nil
}

// readFilters parses filters from the arguments, or from stdin when there
// are none or one is "-". Each JSON value is a filter object or an array
// of them; filters are numbered from 1 across all of them.
func readFilters(cmd string, args []string, stdin io.Reader) ([]event.Filter, error) {
	if len(args) == 0 {
		args = []string{"-"}
	}
	var filters []event.Filter
	for i, arg := range args {
		var src io.Reader = strings.NewReader(arg)
		what := "argument " + strconv.Itoa(i+1)
		if arg == "-" {
			src, what = stdin, "stdin"
		}
		dec := json.NewDecoder(src)
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, cli.Usagef("%s: %s is not JSON: %v", cmd, what, err)
			}
			objs, err := filterObjects(raw)
			if err != nil {
				return nil, cli.Usagef("%s: %s: %v", cmd, what, err)
			}
			for _, obj := range objs {
				f, err := event.ParseFilter(obj)
				if err != nil {
					return nil, cli.Usagef("%s: filter %d: %v", cmd, len(filters)+1, err)
				}
				filters = append(filters, f)
			}
		}
	}
	if len(filters) == 0 {
		return nil, cli.Usagef(`%s: no filter given (e.g. '{"kinds":[9],"limit":20}', or --kinds 9 --limit 20)`, cmd)
	}
	return filters, nil
}

// filterObjects splits one JSON value into filter objects: the value
// itself, or the elements of an array.
func filterObjects(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return []json.RawMessage{raw}, nil
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(raw, &arr); err != nil {
		return nil, err
	}
	return arr, nil
}

// filterFlags are the --kinds, --limit and --channel of query and count.
// Each fills its field in every filter that does not set it.
type filterFlags struct {
	kinds     kindsFlag
	limit     int
	channel   string
	withLimit bool // count has no --limit: the relay ignores limit there
}

func (ff *filterFlags) bind(fs *pflag.FlagSet) {
	fs.Var(&ff.kinds, "kinds", "kinds for every filter without \"kinds\", comma-separated (e.g. 9,45001)")
	if ff.withLimit {
		fs.IntVar(&ff.limit, "limit", 0, "limit for every filter without \"limit\"")
	}
	fs.StringVar(&ff.channel, "channel", "", "channel UUID: \"#h\" for every filter without one")
}

// given reports whether any of the flags is on the command line.
func (ff *filterFlags) given(fs *pflag.FlagSet) bool {
	return fs.Changed("kinds") || fs.Changed("limit") || fs.Changed("channel")
}

// check validates the flags' values.
func (ff *filterFlags) check(cmd string, fs *pflag.FlagSet) error {
	if ff.limit < 0 {
		return cli.Usagef("%s: --limit %d is negative", cmd, ff.limit)
	}
	if fs.Changed("channel") {
		ch, err := channelID(cmd, "channel", ff.channel)
		if err != nil {
			return err
		}
		ff.channel = ch
	}
	return nil
}

// fill sets the fields the flags give in every filter that lacks them.
func (ff *filterFlags) fill(fs *pflag.FlagSet, filters []event.Filter) {
	for i := range filters {
		f := &filters[i]
		if fs.Changed("kinds") && f.Kinds == nil {
			f.Kinds = slices.Clone(ff.kinds.kinds)
		}
		if fs.Changed("limit") && f.Limit == nil {
			n := ff.limit
			f.Limit = &n
		}
		if fs.Changed("channel") && len(f.Tags["h"]) == 0 {
			if f.Tags == nil {
				f.Tags = map[string][]string{}
			}
			f.Tags["h"] = []string{ff.channel}
		}
	}
}

// pgateHint says what to change when the relay refused filters at the
// p-gate (docs/PROTOCOL.md §7.7): kinds on every filter, or which listed kinds are
// p-gated. It reacts to the relay's answer; it does not judge the gate.
func pgateHint(filters []event.Filter, pubkey string) string {
	for _, f := range filters {
		if !f.HasKinds() {
			return `add "kinds" to every filter — e.g. --kinds 9,45001,45003`
		}
	}
	var gated []int
	for _, f := range filters {
		for _, k := range f.Kinds {
			if event.PGated.Has(k) && !slices.Contains(gated, k) {
				gated = append(gated, k)
			}
		}
	}
	if len(gated) == 0 {
		return ""
	}
	slices.Sort(gated)
	names := make([]string, len(gated))
	for i, k := range gated {
		names[i] = strconv.Itoa(k)
	}
	if len(names) == 1 {
		return fmt.Sprintf(`kind %s is p-gated: add "#p":["%s"] or leave it out`, names[0], pubkey)
	}
	return fmt.Sprintf(`kinds %s are p-gated: add "#p":["%s"] or leave them out`, strings.Join(names, ", "), pubkey)
}
