// Package event is the zero-I/O core of the relay: the Nostr event, its
// canonical serialisation and id, Schnorr signing and verification, filters
// and their NIP-01 matching (Filter.Matches, and Matcher: the same answer
// from a filter compiled once into sets, for live delivery), and the kind
// registry with the kind sets every other package consults.
//
// It owns the meaning of an event. It does NOT talk to the network or the
// database, does NOT know about communities, channels or readers (the read
// gates live in the read engine), and does NOT produce wire messages (package
// wire does).
package event
