package search

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// Key identifies what decides q's page (docs/ARCHITECTURE.md "Search
// cache"): every field of q, the text normalised, the scope's channels in
// any order, the page and the page size clamped. Two queries with one key
// run the same statements and, on the same rows, get the same page. It is
// a SHA-256 of their encoding, so a scope of many channels costs one key's
// bytes.
func (q *Query) Key() [32]byte {
	h := sha256.New()
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(v int64) { b = binary.AppendVarint(b, v) }
	opt := func(v *int64) {
		if v == nil {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		num(*v)
	}
	str(q.Community)
	str(NormalizeText(q.Text))
	num(int64(q.Mode))
	num(int64(q.Scope.kind))
	ids := slices.Clone(q.Scope.ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	num(int64(len(ids)))
	for _, id := range ids {
		str(id)
	}
	num(int64(len(q.Kinds)))
	for _, k := range q.Kinds {
		num(int64(k))
	}
	num(int64(len(q.Authors)))
	for _, a := range q.Authors {
		str(string(a))
	}
	opt(q.Since)
	opt(q.Until)
	num(ClampPage(q.Page))
	num(ClampPerPage(q.PerPage))
	h.Write(b)
	var k [32]byte
	h.Sum(k[:0])
	return k
}
