package pubsub

import (
	"container/list"
	"sync"
	"time"
)

const (
	// EchoTTL is how long a published event stays in the local-echo set.
	EchoTTL = 60 * time.Second
	// EchoMax bounds the local-echo set; the oldest entries go first.
	EchoMax = 10000
)

// echoKey identifies an event in the local-echo set. Ids are unique per
// community, and the receiver takes the community from the topic.
type echoKey struct{ community, id string }

type echoEntry struct {
	key echoKey
	at  time.Time
}

// echoSet remembers the events this process published in the last EchoTTL,
// at most EchoMax of them, so their echo from Redis is not delivered a
// second time (docs/PROTOCOL.md §16.2). Safe for concurrent use.
type echoSet struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[echoKey]*list.Element
	order   list.List // of *echoEntry, oldest first
}

func newEchoSet(ttl time.Duration, limit int, now func() time.Time) *echoSet {
	return &echoSet{ttl: ttl, max: limit, now: now, entries: map[echoKey]*list.Element{}}
}

// Mark adds (community, id), or renews it when present.
func (s *echoSet) Mark(community, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expireLocked(now)
	k := echoKey{community, id}
	if el, ok := s.entries[k]; ok {
		el.Value.(*echoEntry).at = now
		s.order.MoveToBack(el)
		return
	}
	s.entries[k] = s.order.PushBack(&echoEntry{key: k, at: now})
	for s.order.Len() > s.max {
		s.removeLocked(s.order.Front())
	}
}

// Remove forgets (community, id): its PUBLISH failed, so no echo will come.
func (s *echoSet) Remove(community, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.entries[echoKey{community, id}]; ok {
		s.removeLocked(el)
	}
}

// Has reports whether (community, id) was marked less than ttl ago.
func (s *echoSet) Has(community, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(s.now())
	_, ok := s.entries[echoKey{community, id}]
	return ok
}

// Len is the number of live entries.
func (s *echoSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(s.now())
	return s.order.Len()
}

// expireLocked drops the entries older than ttl, which are all at the front.
func (s *echoSet) expireLocked(now time.Time) {
	for el := s.order.Front(); el != nil && now.Sub(el.Value.(*echoEntry).at) >= s.ttl; el = s.order.Front() {
		s.removeLocked(el)
	}
}

func (s *echoSet) removeLocked(el *list.Element) {
	delete(s.entries, el.Value.(*echoEntry).key)
	s.order.Remove(el)
}
