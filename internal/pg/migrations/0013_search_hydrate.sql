-- 0013: a search page's events read by their keys with one cached plan
-- (docs/PERFORMANCE.md "Search hydration planned once").
--
-- A search hydrates its page's hits by (community, created_at, id). Sent
-- as a plain prepared statement, PostgreSQL planned it anew for every call:
-- its generic plan costs every partition of events, so the planner kept
-- preferring a custom plan, which took 1.5–7 ms to plan against 0.05–0.25
-- ms to run. A PL/pgSQL function keeps one plan per connection, and
-- force_generic_plan makes it the generic one, whose partitions are pruned
-- as each key is looked up. search_day_matches and search_anchor (0010)
-- are planned the same way for the same reason.
CREATE FUNCTION search_hydrate(community uuid, at timestamptz[], ids bytea[])
RETURNS TABLE (event_id bytea, event_pubkey bytea, event_created_at bigint, event_kind int,
               event_tags jsonb, event_content text, event_sig bytea, event_channel_id text)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  RETURN QUERY
    SELECT e.id, e.pubkey, EXTRACT(EPOCH FROM e.created_at)::bigint, e.kind, e.tags, e.content, e.sig, e.channel_id::text
    FROM unnest(at, ids) AS h(created_at, id)
    JOIN events AS e ON e.community_id = community AND e.created_at = h.created_at AND e.id = h.id
    WHERE e.deleted_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now());
END
$$;
