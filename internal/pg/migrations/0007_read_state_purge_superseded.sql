-- 0007_read_state_purge_superseded: NIP-RS read state, part 2 of 2 (spec 40
-- §4.5, §5.2): physically remove the legacy history that plain NIP-33
-- replacement left behind for conforming read-state coordinates, and record
-- what was removed.
--
-- The purge set is every conforming row (nip_rs_read_state_row, 0006) with
-- deleted_at set that a live row at the same coordinate strictly dominates:
-- newer created_at, or the same created_at and a lower id. One statement
-- deletes those events rows first and their event_mentions rows second (the
-- lock order of every other path) and writes one read_state_retention_purges
-- row per (community, events partition) that lost rows. Their watermarks were
-- seeded by 0006 and stay.
--
-- Left alone on purpose: rows deleted through NIP-09 whose coordinate has no
-- live head (their watermark already blocks replays), nonconforming rows, and
-- search_tsv with its GIN index (no rewrite, no rebuild). Since 0006's
-- triggers already run, no new deleted conforming row can appear between the
-- two files.
--
-- This file changes existing rows, a deliberate exception to the additive
-- rule. SHARE ROW EXCLUSIVE on events lets reads go on and makes writers wait
-- until commit. The purge opts in to hard deletes transaction-locally, so the
-- setting ends with this file's transaction. Physical deletion makes the space
-- reusable inside the table once vacuumed; it does not shrink the files
-- (spec 40 §9). Frozen once released.

SET LOCAL lock_timeout = '5s';

LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;

SELECT set_config('buzz.nip_rs_hard_delete', 'on', true);

-- A tenant table, read by `buzz-relay maintenance read-state --report`.
-- partition_filenode is pg_relation_filenode of the partition at purge time,
-- so a later rewrite of it is detectable. purged_payload_bytes is the sum of
-- octet_length(content) + octet_length(tags::text) of the purged rows, a
-- lower bound of the space they occupied.
CREATE TABLE read_state_retention_purges (
    community_id         UUID        NOT NULL REFERENCES communities (id),
    partition_name       TEXT        NOT NULL,
    partition_filenode   OID         NOT NULL,
    purged_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    purged_rows          BIGINT      NOT NULL,
    purged_payload_bytes BIGINT      NOT NULL,
    PRIMARY KEY (community_id, partition_name, purged_at)
);

WITH purged AS (
  DELETE FROM events old
  WHERE old.kind = 30078 AND old.deleted_at IS NOT NULL
    AND nip_rs_read_state_row(old.kind, old.d_tag, old.tags)
    AND EXISTS (SELECT 1 FROM events live
                WHERE live.community_id = old.community_id AND live.kind = old.kind
                  AND live.pubkey = old.pubkey AND live.d_tag = old.d_tag
                  AND live.deleted_at IS NULL
                  AND (live.created_at > old.created_at
                       OR (live.created_at = old.created_at AND live.id < old.id)))
  RETURNING old.community_id, old.id, old.created_at, old.tableoid,
            octet_length(old.content) + octet_length(old.tags::text) AS payload_bytes),
mentions AS (
  DELETE FROM event_mentions m USING purged p
  WHERE m.community_id = p.community_id AND m.event_id = p.id
    AND m.event_created_at = p.created_at)
INSERT INTO read_state_retention_purges
  (community_id, partition_name, partition_filenode, purged_rows, purged_payload_bytes)
SELECT community_id, tableoid::regclass::text, pg_relation_filenode(tableoid),
       count(*), sum(payload_bytes)
FROM purged GROUP BY community_id, tableoid;
