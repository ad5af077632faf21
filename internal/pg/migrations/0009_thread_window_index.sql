-- 0009: the index NIP-CW thread windows walk (50-windows.md §5.4, §8).
--
-- A thread page scans one root's replies newest first from its cursor:
-- (community_id, root_event_id, event_created_at DESC, event_id ASC) lets
-- the inner LIMIT of the scan stop after the page, whatever the
-- statistics say.
--
-- The lock and the build are bounded: on a database whose thread_metadata
-- is too large to index within 5 s, prebuild the index with CREATE INDEX
-- CONCURRENTLY first (docs/OPERATIONS.md, "Thread-window index"); this
-- file then only validates it. An invalid remnant of a failed concurrent
-- build, or an index of that name with another definition, stops the
-- migration with a pointer to the same section.
SET LOCAL lock_timeout = '1s';
SET LOCAL statement_timeout = '5s';

DO $$
BEGIN
  IF to_regclass('public.idx_thread_metadata_window') IS NULL THEN
    CREATE INDEX idx_thread_metadata_window ON public.thread_metadata
      (community_id, root_event_id, event_created_at DESC, event_id ASC);
  END IF;
  IF NOT EXISTS (
    SELECT 1
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relname = 'idx_thread_metadata_window'
      AND i.indisvalid AND i.indisready AND i.indislive
      AND pg_get_indexdef(i.indexrelid) = 'CREATE INDEX idx_thread_metadata_window ON public.thread_metadata USING btree (community_id, root_event_id, event_created_at DESC, event_id)'
  ) THEN
    RAISE EXCEPTION 'idx_thread_metadata_window invalid or wrong definition; see docs/OPERATIONS.md';
  END IF;
END
$$;
