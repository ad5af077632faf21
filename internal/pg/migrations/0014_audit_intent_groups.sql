-- 0014: the event_created intents of one batch insert in one outbox row
-- (docs/PERFORMANCE.md "Audit intents grouped by statement").
--
-- The group-commit statement stored one audit_outbox row per event: a heap
-- row and three index entries on the writer's serial path, then a delete
-- and a dead row for the chainer. audit_intent_groups holds them as one row
-- per community per statement, the intents in arrays in the order they were
-- written. Its ids come from audit_outbox's sequence, so the chainer orders
-- the two tables' rows on one scale. A separate table keeps a chainer of an
-- older release (a rolling upgrade) from chaining a group as one entry: it
-- does not read this table, and leaves the groups to the upgraded ones.
CREATE TABLE audit_intent_groups (
    community_id  UUID        NOT NULL,
    id            BIGINT      NOT NULL DEFAULT nextval(pg_get_serial_sequence('audit_outbox', 'id')),
    n             INT         NOT NULL CHECK (n BETWEEN 1 AND 10000),
    actions       TEXT[]      NOT NULL,
    actors        BYTEA[]     NOT NULL,
    object_ids    TEXT[]      NOT NULL,
    details       JSONB[]     NOT NULL,
    occurred_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (community_id, id)
);

-- A queue like audit_outbox: vacuum it by row count.
ALTER TABLE audit_intent_groups SET (autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 1000);
