-- 0004: extended statistics on (community_id, channel_id) for every events
-- partition.
--
-- A channel belongs to exactly one community, so the two columns are
-- functionally dependent. Without these statistics the planner multiplies
-- their selectivities as if they were independent and, for a search scoped
-- to a community's channels, underestimates the community's rows by the
-- number of communities. It then ANDs the search GIN with a bitmap of the
-- wide (community_id, channel_id, created_at, id) btree instead of the
-- small, deduplicated (community_id, deleted_at) one (docs/PERFORMANCE.md,
-- "Search"). Statistics are per partition: PostgreSQL plans each partition
-- from its own. New partitions get theirs when they are created
-- (pg.EnsurePartitions). The statistics are filled by the next ANALYZE of
-- each partition (autovacuum or the relay's own); until then plans are
-- unchanged. Creating them takes no lock that blocks reads or writes.
DO $$
DECLARE
  part regclass;
BEGIN
  FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'events'::regclass LOOP
    EXECUTE format('CREATE STATISTICS IF NOT EXISTS %I (dependencies, ndistinct) ON community_id, channel_id FROM %s',
                   (SELECT relname FROM pg_class WHERE oid = part) || '_community_channel', part);
  END LOOP;
END $$;
