-- 0008_operator_listener_mentions: operator listeners (spec 60 §5): the
-- target pubkeys each listener registered and the transactional outbox of
-- mention notifications. Additive: two tables and their indexes.
--
-- Both tables are deployment-global on purpose, a deliberate exception to
-- community isolation (spec 60 §2): a listener's registration matches
-- mentions in every community, including ones created later. They are
-- registered in _operator_global_tables before they are created, so the
-- schema's tenancy test and any community-deletion code treat them as
-- deployment-global. community_id on an outbox row is the event's
-- provenance, not a fence; it has no foreign key, and community deletion
-- leaves both tables alone (a row whose community is gone is never claimed
-- and is reaped within 15 minutes).
--
-- operator_listener_pubkeys: one row per (listener, target); POST renews
-- created_at, and registrations older than 30 days are reaped daily.
--
-- operator_listener_outbox: one row per (listener, target, community, event),
-- written by the event's own insert statement only when it created the event
-- row, so the row commits (or rolls back) with the event. A delivery worker
-- claims due rows (state pending, or sending with an expired lease), fenced
-- by claim_id; rows older than 15 minutes are never claimed and are reaped.
--
-- No foreign keys, no triggers, no functions, no separate match queue: every
-- behaviour lives in the application (internal/store/listeners.go).

INSERT INTO _operator_global_tables (table_name, reason) VALUES
    ('operator_listener_pubkeys', 'deployment-global target registrations for operator listeners'),
    ('operator_listener_outbox', 'deployment-global mention delivery queue; community_id is event provenance');

CREATE TABLE operator_listener_pubkeys (
  listener_pubkey BYTEA NOT NULL CHECK (length(listener_pubkey) = 32),
  target_pubkey   BYTEA NOT NULL CHECK (length(target_pubkey) = 32),
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (listener_pubkey, target_pubkey));
CREATE INDEX operator_listener_pubkeys_target ON operator_listener_pubkeys (target_pubkey, listener_pubkey);
CREATE INDEX operator_listener_pubkeys_created_at ON operator_listener_pubkeys (created_at);

CREATE TABLE operator_listener_outbox (
  id UUID NOT NULL PRIMARY KEY DEFAULT gen_random_uuid(),
  listener_pubkey BYTEA NOT NULL CHECK (length(listener_pubkey) = 32),
  target_pubkey   BYTEA NOT NULL CHECK (length(target_pubkey) = 32),
  community_id UUID NOT NULL,
  event_id BYTEA NOT NULL CHECK (length(event_id) = 32),
  event_kind INTEGER NOT NULL,
  event_created_at TIMESTAMPTZ NOT NULL,
  state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending','sending')),
  attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  lease_until TIMESTAMPTZ,
  claim_id UUID,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (listener_pubkey, target_pubkey, community_id, event_id));
CREATE INDEX operator_listener_outbox_due ON operator_listener_outbox (next_attempt_at, created_at, id) WHERE state = 'pending';
CREATE INDEX operator_listener_outbox_recovery ON operator_listener_outbox (lease_until, created_at, id) WHERE state = 'sending';
CREATE INDEX operator_listener_outbox_created_at ON operator_listener_outbox (created_at);
