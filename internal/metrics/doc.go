// Package metrics defines the relay's Prometheus metrics of docs/PROTOCOL.md §11.2,
// the audit metrics of docs/PROTOCOL.md §13.9 (audit.go), the search metrics of
// docs/PROTOCOL.md §12.9 (search.go), and the Redis pub/sub and read replica metrics of
// docs/PROTOCOL.md §16.7 (pubsub.go, replica.go).
//
// It owns the metric names, types, help texts, label names and buckets, the
// bounded kind label (KindLabel) and the collector that reads the writer
// pool's statistics at scrape time. New registers everything on the
// prometheus.Registerer it is given; the package keeps no global state and
// never touches prometheus.DefaultRegisterer.
//
// Metrics are always safe to use: Disabled (or New(nil)) builds a full set
// registered nowhere, so a component whose Config.Metrics is nil defaults it
// to Disabled() in its constructor and its call sites never check for nil.
//
// It does NOT decide when a metric moves (the relay, ingest, auth and httpapi
// packages do), serve /metrics (health.MetricsHandler does), or import the
// database driver: the pool is read through SetPoolStatsFunc. Metrics of
// other parts of the relay (read state, listeners) are added by
// those packages on the same registerer.
package metrics
