// Package pgcluster runs the private PostgreSQL cluster that buzz-relay uses
// when DATABASE_URL is unset.
//
// It owns the cluster directory under BUZZ_DATA_DIR (DataDir/pg): finding the
// server binaries (initdb, pg_ctl, postgres), initdb on first run, starting
// and stopping the postmaster with pg_ctl, recovering from a stale
// postmaster.pid after a crash, creating the "buzz" database, and keeping
// min_wal_size of WAL files ahead of the writes from the first start on
// (the WAL reserve, docs/OPERATIONS.md "Private cluster or DATABASE_URL").
//
// The server listens only on a unix socket (listen_addresses = ”), so it
// never clashes with a system PostgreSQL on port 5432; the fixed port number
// only names the socket file. Local connections use trust authentication; the
// socket directory is mode 0700, so only the cluster's owner (and root) can
// connect.
//
// PostgreSQL refuses to run as root. When the process runs as root, the
// cluster runs as the unprivileged system user "buzz-pg" (created with
// useradd when missing): the cluster directory is chowned to it, and DataDir
// and its ancestors are made traversable (o+x, never o+r) so that user can
// reach it. This also applies when DataDir lives under /root.
//
// A postmaster that is already running on the data directory (for example the
// server, while an operator CLI command runs) is reused, and Stop leaves it
// running: a Cluster only stops a postmaster it started itself.
//
// Supervise watches the postmaster and restarts it when it dies, with
// bounded attempts and backoff; the relay runs it for the lifetime of a
// serving process, operator commands do not.
//
// StartStandby clones a running cluster with pg_basebackup into a
// streaming hot standby of its own, SetSynchronousStandby makes a primary
// wait for it at every COMMIT, and Promote ends its recovery: the topology
// of docs/OPERATIONS.md "High availability", which the soak's failover
// fault runs (internal/soak). buzz-relay itself never runs a standby.
//
// It does NOT apply migrations (package pg does), it does NOT open a
// connection pool, and it does NOT manage external servers given by
// DATABASE_URL.
package pgcluster
