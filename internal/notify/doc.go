// Package notify sends one operator-listener mention notification
// (docs/PROTOCOL.md §15.6) and classifies the answer (docs/PROTOCOL.md §15.7).
//
// It owns the notification body (Body), the relay-signed NIP-98 auth event
// that goes with it, the dedicated HTTPS client (whole-request timeout, TLS
// verification on, redirects never followed, at most 64 KiB of a response
// read and discarded), the Outcome classes and the retry schedule
// (RetryDelay, MaxAttempts).
//
// It does NOT touch storage, claim outbox rows, count attempts, decide that
// retries are exhausted, log, or keep metrics: the delivery worker does all
// of that with the Outcome it gets back. It never logs or returns a response
// body, and an Outcome's Reason never carries the listener URL.
//
// Trust: a Client verifies the listener's certificate against the system
// roots. WithRootCAs replaces those roots with a given pool (tests pass the
// certificate pool of their local TLS server); there is no way to turn
// verification off.
package notify
