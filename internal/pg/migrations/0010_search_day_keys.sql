-- 0010: day keys, so a search finds a word's newest matches without reading
-- all of them (spec 20 §3.4, the rank window; docs/PERFORMANCE.md, "Search:
-- day keys").
--
-- search_day_keys gives one key per lexeme of a searchable event:
-- base64(community id) ':' day ':' lexeme, where day is the UTC day number
-- (Unix seconds / 86400, rounded down). A GIN over the keys answers "the
-- matches of this word in this community on these days" with the posting
-- lists of those days only, however many matches the word has elsewhere.
-- The function is IMMUTABLE: the epoch of a timestamptz does not depend on
-- the session's time zone, and uuid_send, encode and tsvector_to_array are
-- immutable. The relay computes the same keys (internal/search, dayKeys).
-- It is PL/pgSQL because every insert evaluates it: a SQL-language
-- function with a FROM is run as a query, parsed and planned once per
-- INSERT statement, and measured four times the cost on single inserts
-- (docs/PERFORMANCE.md, "Search: day keys").
--
-- search_day_matches runs that GIN probe and returns only the columns a
-- search reads. It is PL/pgSQL so that its one statement keeps a generic
-- plan per connection (the plan cannot differ by key: the GIN is the only
-- index the predicate can use), instead of being planned over every
-- partition on each call.
--
-- search_anchor gives the day a search walks back from: that of the
-- community's newest searchable event of the filter's kinds within its
-- since..until, and the partition holding it (NULLs when there is none).
-- No match can be newer. It walks the primary key backwards from the
-- newest row, with one generic plan per connection for the same reason.
--
-- On a large database the index build holds a SHARE lock on events (writes
-- wait) for about 20 s per million searchable events; OPERATIONS ("Search
-- day-key index") shows how to prebuild it partition by partition with
-- CREATE INDEX CONCURRENTLY, after which this CREATE INDEX only attaches.
SET LOCAL lock_timeout = '5s';

CREATE OR REPLACE FUNCTION search_day_keys(community uuid, at timestamptz, tsv tsvector)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
  prefix text;
  keys text[] := '{}';
  lexeme text;
BEGIN
  IF tsv IS NULL THEN
    RETURN NULL;
  END IF;
  prefix := encode(uuid_send(community), 'base64') || ':' || floor(extract(epoch FROM at) / 86400)::bigint || ':';
  FOREACH lexeme IN ARRAY tsvector_to_array(tsv) LOOP
    keys := keys || (prefix || lexeme);
  END LOOP;
  RETURN keys;
END
$$;

CREATE INDEX IF NOT EXISTS idx_events_search_day_keys ON events
  USING GIN (search_day_keys(community_id, created_at, search_tsv));

CREATE OR REPLACE FUNCTION search_day_matches(keys text[])
RETURNS TABLE (community_id uuid, id bytea, kind int, pubkey bytea, channel_id uuid,
               created_at timestamptz, deleted_at timestamptz, search_tsv tsvector)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  RETURN QUERY
    SELECT e.community_id, e.id, e.kind, e.pubkey, e.channel_id, e.created_at, e.deleted_at, e.search_tsv
    FROM events AS e
    WHERE search_day_keys(e.community_id, e.created_at, e.search_tsv) && keys;
END
$$;

CREATE OR REPLACE FUNCTION search_anchor(community uuid, kinds int[], since timestamptz, until timestamptz,
                                         OUT day bigint, OUT part name)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  SELECT floor(extract(epoch FROM e.created_at) / 86400)::bigint, c.relname
  INTO day, part
  FROM events AS e
  JOIN pg_catalog.pg_class AS c ON c.oid = e.tableoid
  WHERE e.community_id = community AND e.search_tsv IS NOT NULL
    AND (kinds IS NULL OR e.kind = ANY(kinds))
    AND e.created_at >= coalesce(since, '-infinity') AND e.created_at <= coalesce(until, 'infinity')
  ORDER BY e.created_at DESC
  LIMIT 1;
END
$$;
