-- 0003_audit: the per-community hash chain of spec 30 §2.
--
-- audit_log is the chain: one per community, seq 1, 2, 3 … with each
-- prev_hash the previous entry's hash. audit_outbox holds intents written in
-- the transaction of the action they record, until the chainer moves them
-- into the chain. Both are tenant tables: community_id leads every key.

CREATE TABLE audit_log (
    community_id  UUID        NOT NULL REFERENCES communities (id),
    seq           BIGINT      NOT NULL CHECK (seq >= 1),
    hash          BYTEA       NOT NULL CHECK (octet_length(hash) = 32),
    prev_hash     BYTEA                CHECK (prev_hash IS NULL OR octet_length(prev_hash) = 32),
    action        VARCHAR(64) NOT NULL,
    actor_pubkey  BYTEA                CHECK (actor_pubkey IS NULL OR octet_length(actor_pubkey) = 32),
    object_id     TEXT,
    detail        JSONB       NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    hash_version  SMALLINT    NOT NULL,
    PRIMARY KEY (community_id, seq)
);

CREATE UNIQUE INDEX idx_audit_log_hash   ON audit_log (community_id, hash);
CREATE INDEX        idx_audit_log_object ON audit_log (community_id, object_id) WHERE object_id IS NOT NULL;

-- The append-only guard. Only community deletion sets buzz.audit_purge.
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('buzz.audit_purge', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'audit_log is append-only';
END $$;

CREATE TRIGGER trg_audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER trg_audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

CREATE TABLE audit_outbox (
    community_id  UUID        NOT NULL REFERENCES communities (id),
    id            BIGINT      GENERATED ALWAYS AS IDENTITY,
    dedupe_key    TEXT        NOT NULL,
    action        VARCHAR(64) NOT NULL,
    actor_pubkey  BYTEA,
    object_id     TEXT,
    detail        JSONB       NOT NULL,
    occurred_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (community_id, id),
    UNIQUE (community_id, dedupe_key)
);

CREATE INDEX idx_audit_outbox_occurred ON audit_outbox (occurred_at);

-- A queue: rows live for seconds, so vacuum it by row count, not by size.
ALTER TABLE audit_outbox SET (autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 1000);
