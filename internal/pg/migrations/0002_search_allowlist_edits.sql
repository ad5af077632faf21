-- 0002: add kind 40003 (message edit) to the search allowlist, on fresh
-- installations only (20-search.md §2.3 a, the fresh-install rule).
--
-- PostgreSQL cannot change a generated expression in place: the column is
-- dropped, added back and its GIN recreated, which rewrites events. That is
-- only done while events is empty. SHARE ROW EXCLUSIVE lets readers go on and
-- makes writers wait, so no insert can slip in between the emptiness check
-- and the rewrite.
--
-- On a populated table this migration is recorded and changes nothing: the
-- expression, heap, TOAST and GIN keep their relfilenodes, and 40003 stays
-- unsearchable until the operator runs
-- `buzz-relay maintenance search-kinds --set …` in a maintenance window.
--
-- The kind numbers are written out: a migration is frozen SQL and never
-- imports the code's constants. The first list is the privacy list of its
-- time (search.PrivacyKinds).
LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM events LIMIT 1) THEN
    ALTER TABLE events DROP COLUMN search_tsv;
    ALTER TABLE events ADD COLUMN search_tsv TSVECTOR GENERATED ALWAYS AS (
      CASE WHEN kind IN (1059, 30174, 30179, 30300, 30350, 30622, 44100, 44101, 44200) THEN NULL::tsvector
           WHEN kind IN (0, 9, 40002, 40003, 45001, 45003) THEN to_tsvector('simple', content)
           ELSE NULL::tsvector
      END) STORED;
    CREATE INDEX idx_events_search_tsv ON events USING GIN (search_tsv);
  END IF;
END $$;
