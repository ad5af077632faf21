package wsapi

import (
	"strconv"
	"testing"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// benchSub is a global subscription of kinds 1…kinds × ps #p values.
func benchSub(kinds, ps int) *subscription {
	f := event.Filter{Kinds: make([]int, kinds), Tags: map[string][]string{"p": make([]string, ps)}}
	for i := range f.Kinds {
		f.Kinds[i] = i + 1
	}
	for i := range f.Tags["p"] {
		f.Tags["p"][i] = strconv.Itoa(i)
	}
	return &subscription{conn: &conn{tenant: tenant.Tenant{CommunityID: "c"}}, filters: []event.Filter{f}}
}

// BenchmarkRegistration is the work of registering one subscription in the
// live index and removing it: at the subscription cap (64 kinds × 64 #p,
// 4,096 keys), and the refusal of the attack at the array caps (64 kinds
// × 1,000 #p, 64,000 keys, counted and refused).
func BenchmarkRegistration(b *testing.B) {
	s := New(Config{Settings: config.Defaults()})
	b.Run("Keys4096", func(b *testing.B) {
		sub := benchSub(64, 64)
		for b.Loop() {
			p, refusal, _ := s.planSub(sub, nil)
			if refusal != "" {
				b.Fatal(refusal)
			}
			sub.keys, sub.match = p.keys, p.match
			s.idx.add(sub)
			s.idx.remove(sub)
		}
	})
	b.Run("Keys64000", func(b *testing.B) {
		sub := benchSub(64, 1000)
		for b.Loop() {
			if _, refusal, _ := s.planSub(sub, nil); refusal == "" {
				b.Fatal("not refused")
			}
		}
	})
}
