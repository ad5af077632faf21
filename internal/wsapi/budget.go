package wsapi

import (
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/wire"
)

// plan is what registering a subscription will add, computed before any
// lock is taken: its scope, its index keys, its compiled filters and the
// filter bytes it retains. Building it costs the filters' values (linear),
// never their products past the subscription cap.
type plan struct {
	channels map[string]struct{}
	keys     []indexKey
	match    []*event.Matcher
	bytes    int
}

// planSub computes sub's plan for the scope the read door confirmed
// (channels nil for a global subscription). It returns the refusal text
// and the cap's metric label when the subscription needs more index keys
// than SubMaxIndexKeys.
func (s *Server) planSub(sub *subscription, channels []string) (p plan, refusal, which string) {
	if channels != nil {
		p.channels = make(map[string]struct{}, len(channels))
		for _, ch := range channels {
			p.channels[ch] = struct{}{}
		}
	}
	community := sub.conn.tenant.CommunityID
	n := indexKeyCount(sub.filters, p.channels)
	if n > s.set.Filters.SubMaxIndexKeys {
		return plan{}, wire.SubscriptionTooManyIndexKeys(n, s.set.Filters.SubMaxIndexKeys), "subscription_index_keys"
	}
	p.keys = keysOf(community, sub.filters, p.channels, n)
	p.match = make([]*event.Matcher, len(sub.filters))
	var buf []byte
	for i := range sub.filters {
		p.match[i] = sub.filters[i].Compile()
		buf = sub.filters[i].AppendJSON(buf[:0])
		p.bytes += len(buf)
	}
	return p, "", ""
}

// admitLocked checks the connection caps for p and, when they hold, takes
// p's share of them. It returns the refusal text and the cap's label
// otherwise. c.mu must be held; it costs nothing that grows with p.
func (c *conn) admitLocked(p *plan) (refusal, which string) {
	cfg := &c.srv.set.Filters
	if n := c.indexKeys + len(p.keys); n > cfg.ConnMaxIndexKeys {
		return wire.ConnectionTooManyIndexKeys(n, cfg.ConnMaxIndexKeys), "connection_index_keys"
	}
	if n := c.filterBytes + p.bytes; n > cfg.ConnMaxFilterBytes {
		return wire.ConnectionTooManyFilterBytes(n, cfg.ConnMaxFilterBytes), "connection_filter_bytes"
	}
	c.indexKeys += len(p.keys)
	c.filterBytes += p.bytes
	return "", ""
}

// product is one filter's share of the index keys: every (a, b) of as × bs.
type product[A, B comparable] struct {
	as []A
	bs []B
}

// products returns each filter's keys as a product, in the shape keysOf
// builds them: (channel, kind) for a channel subscription, (kind, #p) for a
// global one. A filter with kinds [] has none.
func products(filters []event.Filter, channels map[string]struct{}) (chans []product[string, int], global []product[int, string]) {
	anyKinds := []int{anyKind}
	noP := []string{""}
	for i := range filters {
		f := &filters[i]
		if f.MatchesNothing() {
			continue
		}
		if channels != nil {
			var named []string
			for _, ch := range f.Tags["h"] {
				if _, ok := channels[ch]; ok {
					named = append(named, ch)
				}
			}
			kinds := f.Kinds
			if kinds == nil {
				kinds = anyKinds
			}
			chans = append(chans, product[string, int]{named, kinds})
			continue
		}
		if f.Kinds == nil {
			global = append(global, product[int, string]{anyKinds, noP})
			continue
		}
		ps := f.Tags["p"]
		if len(ps) == 0 {
			ps = noP
		}
		global = append(global, product[int, string]{f.Kinds, ps})
	}
	return chans, global
}

// indexKeyCount is the number of distinct index keys the filters need,
// computed without building them (distinctPairs), so that a subscription
// over the cap costs its values, not their product.
func indexKeyCount(filters []event.Filter, channels map[string]struct{}) int {
	chans, global := products(filters, channels)
	if channels != nil {
		return distinctPairs(chans)
	}
	return distinctPairs(global)
}

// keysOf builds the distinct index keys of the filters, deduplicated with
// a set sized for n, their count; call it after indexKeyCount allowed them.
// A filter with kinds [] gets none.
func keysOf(community string, filters []event.Filter, channels map[string]struct{}, n int) []indexKey {
	keys := make([]indexKey, 0, n)
	seen := make(map[indexKey]struct{}, n)
	add := func(k indexKey) {
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			keys = append(keys, k)
		}
	}
	chans, global := products(filters, channels)
	for _, p := range chans {
		for _, ch := range p.as {
			for _, k := range p.bs {
				add(indexKey{community: community, channel: ch, kind: k})
			}
		}
	}
	for _, p := range global {
		for _, k := range p.as {
			for _, v := range p.bs {
				add(indexKey{community: community, kind: k, p: v})
			}
		}
	}
	return keys
}

// maxMaskedProducts is the product count up to which distinctPairs counts
// by filter masks; wire.MaxFilters is below it.
const maxMaskedProducts = 16

// distinctPairs returns |∪ as×bs| over ps in time linear in the values
// plus 2^len(ps)·len(ps): each value gets the mask of the products it is
// in, and a pair (a, b) is in the union exactly when their masks meet. For
// each a, the b's whose mask misses a's are counted with a subset-sum
// table over the masks.
func distinctPairs[A, B comparable](ps []product[A, B]) int {
	if len(ps) > maxMaskedProducts {
		seen := make(map[struct {
			a A
			b B
		}]struct{})
		for _, p := range ps {
			for _, a := range p.as {
				for _, b := range p.bs {
					seen[struct {
						a A
						b B
					}{a, b}] = struct{}{}
				}
			}
		}
		return len(seen)
	}
	aMask := make(map[A]uint32)
	bMask := make(map[B]uint32)
	for i, p := range ps {
		if len(p.as) == 0 || len(p.bs) == 0 {
			continue
		}
		bit := uint32(1) << i
		for _, a := range p.as {
			aMask[a] |= bit
		}
		for _, b := range p.bs {
			bMask[b] |= bit
		}
	}
	if len(aMask) == 0 {
		return 0
	}
	// within[S] = the b's whose mask is a subset of S.
	full := uint32(1)<<len(ps) - 1
	within := make([]int, full+1)
	for _, m := range bMask {
		within[m]++
	}
	for bit := uint32(1); bit <= full; bit <<= 1 {
		for set := uint32(0); set <= full; set++ {
			if set&bit != 0 {
				within[set] += within[set^bit]
			}
		}
	}
	n := 0
	for _, m := range aMask {
		n += len(bMask) - within[full&^m]
	}
	return n
}
