package window

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/buzz-relay/buzz/internal/event"
)

// bindingPrefix starts the d tag of every 39007: format tw, version 1.
const bindingPrefix = "tw:1:"

// Binding is the d tag value of a window's 39007: "tw:1:" and the hex SHA-256
// of the binding array of docs/NIP-CW.md §5.5. host is the request's
// normalised host, reader the authenticated pubkey (lowercase hex).
func Binding(host, reader string, r ThreadRequest) string {
	sum := sha256.Sum256(bindingArray(host, reader, r))
	return bindingPrefix + hex.EncodeToString(sum[:])
}

// bindingArray is the compact JSON that Binding hashes:
// ["tw",1,"older",host,reader,channel,root,limit,depth,kinds,cursor,include_aux],
// strings escaped as NIP-01 escapes them (nothing HTML-escaped).
func bindingArray(host, reader string, r ThreadRequest) []byte {
	b := []byte(`["tw",1,"older",`)
	for _, s := range []string{host, reader, r.Channel, r.Root} {
		b = event.AppendString(b, s)
		b = append(b, ',')
	}
	b = strconv.AppendInt(b, int64(r.Limit), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(r.Depth), 10)
	b = append(b, ",["...)
	for i, k := range r.Kinds {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(k), 10)
	}
	b = append(b, "],"...)
	if r.Cursor == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		b = strconv.AppendInt(b, r.Cursor.CreatedAt, 10)
		b = append(b, ',')
		b = event.AppendString(b, r.Cursor.ID)
		b = append(b, ']')
	}
	b = append(b, ',')
	b = strconv.AppendBool(b, r.IncludeAux)
	return append(b, ']')
}

// threadBoundsContent is the content of a 39007 (docs/NIP-CW.md §5.4), in the
// relay's key order.
func threadBoundsContent(hasMore bool, next *Cursor) string {
	b := []byte(`{"version":1,"direction":"older","has_more":`)
	b = strconv.AppendBool(b, hasMore)
	b = append(b, `,"next_cursor":`...)
	if next == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"created_at":`...)
		b = strconv.AppendInt(b, next.CreatedAt, 10)
		b = append(b, `,"id":"`...)
		b = append(b, next.ID...)
		b = append(b, `"}`...)
	}
	return string(b) + "}"
}
