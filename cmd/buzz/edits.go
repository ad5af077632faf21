package main

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
)

// maxRows is the relay's per-filter row bound (docs/PROTOCOL.md §7.11).
const maxRows = 1000

// editsFilter asks for the kind 40003 edits in channel that name one of
// messages in an e tag. The relay returns the newest maxRows; a page of
// messages with more edits than that may show an older text for some.
func editsFilter(channel string, messages []event.Event) event.Filter {
	ids := make([]string, len(messages))
	for i, m := range messages {
		ids[i] = m.ID
	}
	limit := maxRows
	return event.Filter{Kinds: []int{kindMessageEdit}, Tags: map[string][]string{"h": {channel}, "e": ids}, Limit: &limit}
}

// editTarget is the message an edit replaces: its first e tag with a
// 64-hex value (docs/PROTOCOL.md §6.2), lowercase; "" when there is none.
func editTarget(edit event.Event) string {
	for _, t := range edit.Tags {
		if len(t) >= 2 && t[0] == "e" && event.IsHexAnyCase64(t[1]) {
			return strings.ToLower(t[1])
		}
	}
	return ""
}

// newestEdits maps each message id to the edit that gives its current
// text. Only a kind 40003 by the message's own author counts (the relay
// refuses others, but an e tag may also just mention a message); the
// newest created_at wins, and on a tie the lowest id, as for replaceable
// events (docs/PROTOCOL.md §6.5).
func newestEdits(messages, edits []event.Event) map[string]event.Event {
	author := make(map[string]string, len(messages))
	for _, m := range messages {
		author[m.ID] = m.PubKey
	}
	newest := map[string]event.Event{}
	for _, e := range edits {
		target := editTarget(e)
		if e.Kind != kindMessageEdit || target == "" || author[target] != e.PubKey {
			continue
		}
		cur, ok := newest[target]
		if !ok || e.CreatedAt > cur.CreatedAt || (e.CreatedAt == cur.CreatedAt && e.ID < cur.ID) {
			newest[target] = e
		}
	}
	return newest
}

// editedInfo is the "edited" field of an edited message's line.
type editedInfo struct {
	ID        string `json:"id"`
	CreatedAt int64  `json:"created_at"`
	Original  string `json:"original"`
}

// showEdited is the line messages list prints for msg: msg as stored when
// edit is the zero event, else msg with the edit's text as "content" and
// an "edited" field after the event's own (a view, not a signed event).
func showEdited(msg, edit event.Event) json.RawMessage {
	if edit.ID == "" {
		return msg.AppendJSON(nil)
	}
	var info bytes.Buffer
	enc := json.NewEncoder(&info)
	enc.SetEscapeHTML(false) // the original text as the relay stored it
	_ = enc.Encode(editedInfo{ID: edit.ID, CreatedAt: edit.CreatedAt, Original: msg.Content})
	shown := msg
	shown.Content = edit.Content
	b := shown.AppendJSON(nil)
	b = append(b[:len(b)-1], `,"edited":`...) // drop the closing brace, add one field
	b = append(b, bytes.TrimSpace(info.Bytes())...)
	return append(b, '}')
}
