// Package listener delivers operator-listener mention notifications
// (docs/PROTOCOL.md §15.5) and keeps the listener tables within their retention (docs/PROTOCOL.md §15.8).
//
// It owns two services of the one shape of package service:
//
//	Worker  one loop per process with a configured listener: claim up to 10
//	        due outbox rows of the listeners configured here, POST them
//	        concurrently through notify, then apply each outcome with the
//	        fenced transitions (delete, or back to pending with its backoff)
//	Reaper  on every process, listeners or not: outbox rows older than
//	        15 minutes every 5 minutes, registrations older than 30 days
//	        every 24 hours, both once at start
//
// and the metrics of docs/PROTOCOL.md §15.9 that those two move.
//
// It does NOT enqueue (store.EventInsert does, inside the event's
// transaction), parse BUZZ_OPERATOR_LISTENERS (package config does), build
// or sign the request (package notify does) or serve the registration
// routes (package httpapi does). It never logs a body, a URL or a header:
// delivery logs carry the outbox id, listener pubkey, event id, attempt,
// status and reason.
package listener
