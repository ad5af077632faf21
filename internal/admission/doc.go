// Package admission is per-user admission: the quotas every authenticated
// pubkey has in each community (messages, HTTP bridge calls, WebSocket
// frames, channel creations), counted in fixed windows.
//
// It owns the quotas' windows and budgets, the counting (shared between
// relay processes through Redis when REDIS_URL is set, per process
// otherwise, and per process while Redis does not answer), who is exempt
// (the relay's own key and the deployment owner), how an agent is told from
// a human (a cached lookup the composition root passes in), the rejection
// metric and the rate_limit_exceeded audit report of each refusal.
//
// It does NOT decide which request is charged to which quota (the doors and
// the ingest pipeline do, once the sender's identity is verified), spell
// the refusal (package wire does: wire.QuotaExceeded), read the database
// (AgentFunc does) or read the environment (package config does). A nil
// *Limiter admits everything, so components built without one need no
// check.
//
// Redis down: a team relay must keep working, so a charge Redis does not
// answer is counted in this process instead of refused. While Redis is
// down each process counts alone (a pubkey spread over N processes gets up
// to N times its quota); Redis is tried again at most once a second, and
// the outage is logged once when it starts and once when it ends.
package admission
