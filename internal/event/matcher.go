package event

import "slices"

// Matcher is a Filter compiled for repeated matching, as live delivery
// does: every array is a set, so Match costs the event's tags, never the
// filter's values. Match answers exactly as Filter.Matches does. A Matcher
// holds no reference to the Filter's slices it could see changed; it is
// immutable and safe for concurrent use.
type Matcher struct {
	nothing      bool
	ids, authors *stringSet
	kinds        *intSet
	since, until *int64
	// tags are the constraints with at least one value, in no order;
	// byName indexes them when there are many.
	tags   []tagConstraint
	byName map[string]int
	// hAt is the index of the "#h" constraint in tags, -1 without one.
	hAt int
}

type tagConstraint struct {
	name   string
	values stringSet
}

// smallSet is the size up to which a set is a slice scanned in order:
// cheaper than hashing for the one to three values most filters have.
const smallSet = 8

// stringSet is a set of strings: a slice when small, a map otherwise.
type stringSet struct {
	small []string
	m     map[string]struct{}
}

func newStringSet(values []string) *stringSet {
	s := &stringSet{}
	if len(values) <= smallSet {
		s.small = slices.Clone(values)
		return s
	}
	s.m = make(map[string]struct{}, len(values))
	for _, v := range values {
		s.m[v] = struct{}{}
	}
	return s
}

func (s *stringSet) has(v string) bool {
	if s.m != nil {
		_, ok := s.m[v]
		return ok
	}
	return slices.Contains(s.small, v)
}

// intSet is a set of kinds: a slice when small, a map otherwise.
type intSet struct {
	small []int
	m     map[int]struct{}
}

func (s *intSet) has(v int) bool {
	if s.m != nil {
		_, ok := s.m[v]
		return ok
	}
	return slices.Contains(s.small, v)
}

// byNameAbove is the constraint count above which tag names are looked up
// in a map rather than compared in turn.
const byNameAbove = 4

// Compile returns the filter's Matcher. It costs the filter's values once.
func (f *Filter) Compile() *Matcher {
	m := &Matcher{nothing: f.MatchesNothing(), since: f.Since, until: f.Until, hAt: -1}
	if len(f.IDs) > 0 {
		m.ids = newStringSet(f.IDs)
	}
	if len(f.Authors) > 0 {
		m.authors = newStringSet(f.Authors)
	}
	if f.Kinds != nil {
		m.kinds = &intSet{}
		if len(f.Kinds) <= smallSet {
			m.kinds.small = slices.Clone(f.Kinds)
		} else {
			m.kinds.m = make(map[int]struct{}, len(f.Kinds))
			for _, k := range f.Kinds {
				m.kinds.m[k] = struct{}{}
			}
		}
	}
	if f.Since != nil {
		v := *f.Since
		m.since = &v
	}
	if f.Until != nil {
		v := *f.Until
		m.until = &v
	}
	for name, values := range f.Tags {
		if len(values) == 0 {
			continue
		}
		if name == "h" {
			m.hAt = len(m.tags)
		}
		m.tags = append(m.tags, tagConstraint{name: name, values: *newStringSet(values)})
	}
	if len(m.tags) > byNameAbove {
		m.byName = make(map[string]int, len(m.tags))
		for i := range m.tags {
			m.byName[m.tags[i].name] = i
		}
	}
	return m
}

// constraint returns the index of the constraint on tag name, or -1.
func (m *Matcher) constraint(name string) int {
	if m.byName != nil {
		if i, ok := m.byName[name]; ok {
			return i
		}
		return -1
	}
	for i := range m.tags {
		if m.tags[i].name == name {
			return i
		}
	}
	return -1
}

// Match reports whether ev matches, exactly as Filter.Matches(ev, channel)
// of the compiled filter: every constraint but limit and search, a "#h"
// constraint falling back to channel when ev carries no h tag. It walks
// ev's tags once, looking each up in the constraints' sets.
func (m *Matcher) Match(ev *Event, channel string) bool {
	switch {
	case m.nothing:
		return false
	case m.ids != nil && !m.ids.has(ev.ID):
		return false
	case m.authors != nil && !m.authors.has(ev.PubKey):
		return false
	case m.kinds != nil && !m.kinds.has(ev.Kind):
		return false
	case m.since != nil && ev.CreatedAt < *m.since:
		return false
	case m.until != nil && ev.CreatedAt > *m.until:
		return false
	case len(m.tags) == 0:
		return true
	}
	var inline [smallSet]bool
	done := inline[:]
	if len(m.tags) > len(inline) {
		done = make([]bool, len(m.tags))
	}
	left, sawH := len(m.tags), false
	for _, t := range ev.Tags {
		if len(t) == 0 {
			continue
		}
		if t[0] == "h" {
			sawH = true
		}
		if len(t) < 2 {
			continue
		}
		i := m.constraint(t[0])
		if i < 0 || done[i] || !m.tags[i].values.has(t[1]) {
			continue
		}
		done[i] = true
		if left--; left == 0 {
			return true
		}
	}
	// Only the "#h" constraint of an event without h tags can still hold:
	// it then tests the stored channel.
	if left != 1 || m.hAt < 0 || done[m.hAt] || sawH {
		return false
	}
	return channel != "" && m.tags[m.hAt].values.has(channel)
}
