// Package tenant binds every request to its community. It owns the one
// host normaliser (Normalize, docs/PROTOCOL.md §2.1) used for request hosts,
// RELAY_URL, the CLI, NIP-42 relay tags and NIP-98 u tags; the Tenant
// value; the per-process host → community cache (Resolver, docs/PROTOCOL.md §2.2:
// hits 60 s, misses 5 s) that both doors call for "the tenant of this
// request"; the one not-found text both doors answer with (MsgNoCommunity);
// and the interface of the relay-membership gate (MemberChecker).
//
// It imports only the standard library. It does NOT read the database
// itself (the composition root passes the lookup), does NOT create
// communities (the CLI and the startup bootstrap do, through the store),
// and does NOT authenticate anyone.
package tenant
