-- 0011: NIP-40 expiration (docs/PROTOCOL.md §6.6).
--
-- events.expires_at is the event's expiration tag as a time, NULL for an
-- event without one. The relay's insert statements fill it from the tag
-- (internal/store, event.Expiration); every read of stored events skips a
-- row whose expires_at is not after now(), and the maintenance job
-- ExpiredPurge deletes such rows in batches through the partial index.
--
-- Adding a nullable column without a default changes only the catalog: no
-- rewrite. The partial index holds only rows with an expiration, so it stays
-- small, but building it reads every partition once under a SHARE lock
-- (writes wait): on a large database prebuild it per partition with
-- CREATE INDEX CONCURRENTLY first (docs/OPERATIONS.md, "Expired events"),
-- after which this CREATE INDEX only attaches.
--
-- Rows stored before this file have no expires_at; the backfill below finds
-- those with an expiration tag through the tags GIN (jsonb_path_ops answers
-- the containment test) and fills it with the same rule as the relay's: one
-- tag named "expiration" whose value is 1–12 ASCII digits. A row whose tags
-- break the rule keeps NULL (it never expires), as the relay refuses such an
-- event today and never stored it with that meaning.
--
-- search_day_matches (0010) returns expires_at too, so a search's rank
-- window applies the same read predicate as every other read: its return
-- type changes, which CREATE OR REPLACE cannot do, so it is dropped and
-- created again in this transaction (no caller sees it missing). Callers
-- name the columns they read, so a relay of the previous version keeps
-- working against the new function.
SET LOCAL lock_timeout = '5s';

ALTER TABLE events ADD COLUMN IF NOT EXISTS expires_at TIMESTAMPTZ;

CREATE INDEX IF NOT EXISTS idx_events_expires_at ON events (expires_at)
    WHERE expires_at IS NOT NULL;

UPDATE events e SET expires_at = to_timestamp(x.v::bigint)
FROM (
  SELECT community_id, created_at, id, min(t->>1) AS v, count(*) AS n
  FROM events, jsonb_array_elements(CASE WHEN jsonb_typeof(tags) = 'array' THEN tags ELSE '[]'::jsonb END) t
  WHERE tags @> '[["expiration"]]'
    AND jsonb_typeof(t) = 'array' AND t->>0 = 'expiration'
  GROUP BY community_id, created_at, id
) x
WHERE x.n = 1 AND x.v ~ '^[0-9]{1,12}$'
  AND e.community_id = x.community_id AND e.created_at = x.created_at AND e.id = x.id;

DROP FUNCTION search_day_matches(text[]);

CREATE FUNCTION search_day_matches(keys text[])
RETURNS TABLE (community_id uuid, id bytea, kind int, pubkey bytea, channel_id uuid,
               created_at timestamptz, deleted_at timestamptz, expires_at timestamptz, search_tsv tsvector)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  RETURN QUERY
    SELECT e.community_id, e.id, e.kind, e.pubkey, e.channel_id, e.created_at, e.deleted_at, e.expires_at, e.search_tsv
    FROM events AS e
    WHERE search_day_keys(e.community_id, e.created_at, e.search_tsv) && keys;
END
$$;
