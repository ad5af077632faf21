-- 0006_read_state_watermarks: NIP-RS read state, part 1 of 2 (spec 40 §4,
-- §5.1): the guard, the seed and the database rules that every writer obeys
-- (this relay, an older relay binary during a rolling upgrade, hand-written
-- SQL). 0007 then removes the legacy history.
--
-- A kind 30078 row is "conforming" (a read-state row) when
-- nip_rs_read_state_row says so: d_tag is read-state:<32 lowercase hex>,
-- its tags hold exactly one d tag, that d tag's value is d_tag, and exactly
-- one tag is exactly ["t","read-state"] (spec 40 §3; event.ReadStateRow is
-- the same rule in Go). parameterized_event_watermarks keeps, per conforming
-- coordinate (community_id, kind, pubkey, d_tag), the greatest accepted
-- (created_at, event_id): newer created_at wins, and on an equal created_at
-- the lower id. It outlives the payload, so a deleted or older version can
-- never be inserted again.
--
-- The four triggers:
--   trg_events_nip_rs_watermark           BEFORE INSERT on events: advances
--       the watermark, skips the exact watermark tuple (0 rows, no error) and
--       rejects any other stale tuple with SQLSTATE 23514.
--   trg_events_purge_soft_deleted_nip_rs  AFTER UPDATE OF deleted_at on
--       events: a soft delete of a conforming row becomes a physical delete
--       of the row and of its mention rows; the watermark stays.
--   trg_event_mentions_require_live_event BEFORE INSERT on event_mentions:
--       a kind 30078 mention row whose payload is gone or deleted is skipped.
--   trg_events_guard_nip_rs_hard_delete   BEFORE DELETE on events: a row at a
--       read-state coordinate may be deleted only in a transaction that ran
--       set_config('buzz.nip_rs_hard_delete', 'on', true).
--
-- This file changes existing rows (the seed), a deliberate exception to the
-- additive rule: the seed has to run under the same lock that installs the
-- triggers, or a writer could slip between them. SHARE ROW EXCLUSIVE on
-- events lets reads go on and makes every insert, update and delete wait
-- until commit. A RAISE below rolls the whole file back (nothing created,
-- no row changed, not recorded) and stops startup with
-- "migration 0006_read_state_watermarks.sql failed: P0001 <message>".
-- Neither search_tsv nor any events index is touched: no rewrite, no
-- rebuild. Frozen once released: a correction is a new file using
-- CREATE OR REPLACE FUNCTION.

SET LOCAL lock_timeout = '5s';

-- 1. Writers wait from here to commit.
LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;

-- 2. Ambiguity guard: read-state-looking rows whose d/t cardinality the
-- classifier would reject. The text is kept byte for byte for existing
-- runbooks and alerts ("pre-0007": not yet migrated to read-state retention).
DO $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM events e
    WHERE e.kind = 30078 AND e.d_tag LIKE 'read-state:%'
      AND CASE
            WHEN jsonb_typeof(e.tags) <> 'array' THEN true
            WHEN NOT EXISTS (SELECT 1 FROM jsonb_array_elements(e.tags) t
                             WHERE t = '["t","read-state"]'::jsonb) THEN false
            ELSE (SELECT count(*) FROM jsonb_array_elements(e.tags) t
                  WHERE jsonb_typeof(t) = 'array' AND t->0 = '"d"') <> 1
              OR NOT EXISTS (SELECT 1 FROM jsonb_array_elements(e.tags) t
                             WHERE jsonb_typeof(t) = 'array'
                               AND CASE WHEN jsonb_typeof(t) = 'array' THEN jsonb_array_length(t) ELSE 0 END >= 2
                               AND jsonb_typeof(t->1) = 'string' AND t->>0 = 'd' AND t->>1 = e.d_tag)
              OR (SELECT count(*) FROM jsonb_array_elements(e.tags) t
                  WHERE t = '["t","read-state"]'::jsonb) <> 1
          END)
  THEN
    RAISE EXCEPTION 'NIP-RS migration blocked: pre-0007 database contains kind-30078 rows with ambiguous d/t tag cardinality; repair or remove those nonconforming rows before retrying';
  END IF;
END $$;

-- 3. The classifier, the watermark table and the mention index.
-- PostgreSQL does not evaluate the conditions of a WHERE clause in a fixed
-- order, and jsonb_array_length raises 22023 on anything but an array, so
-- it is only reached through a CASE: a tag element that is a string, a
-- number, an object or null is skipped, never an error (here and in the
-- guard above).
CREATE FUNCTION nip_rs_read_state_row(p_kind integer, p_d_tag text, p_tags jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT COALESCE(
  p_kind = 30078
  AND p_d_tag ~ '^read-state:[0-9a-f]{32}$'
  AND (SELECT count(*)
       FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_tags) = 'array' THEN p_tags ELSE '[]'::jsonb END) t
       WHERE jsonb_typeof(t) = 'array' AND t->0 = '"d"') = 1
  AND EXISTS (SELECT 1
       FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_tags) = 'array' THEN p_tags ELSE '[]'::jsonb END) t
       WHERE jsonb_typeof(t) = 'array'
         AND CASE WHEN jsonb_typeof(t) = 'array' THEN jsonb_array_length(t) ELSE 0 END >= 2
         AND jsonb_typeof(t->1) = 'string' AND t->>0 = 'd' AND t->>1 = p_d_tag)
  AND (SELECT count(*)
       FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_tags) = 'array' THEN p_tags ELSE '[]'::jsonb END) t
       WHERE t = '["t","read-state"]'::jsonb) = 1,
  false)
$$;

-- A tenant table: one row per conforming coordinate ever accepted. When a
-- community is purged, its rows go after its events rows.
CREATE TABLE parameterized_event_watermarks (
    community_id UUID        NOT NULL REFERENCES communities (id),
    kind         INT         NOT NULL,
    pubkey       BYTEA       NOT NULL,
    d_tag        TEXT        NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    event_id     BYTEA       NOT NULL,
    PRIMARY KEY (community_id, kind, pubkey, d_tag)
);

-- Deletes the mention rows of a physically deleted payload; 0001 already
-- creates it.
CREATE INDEX IF NOT EXISTS idx_event_mentions_community_event ON event_mentions (community_id, event_id);

-- 4. Fail closed: a deleted conforming row that outranks the live head of its
-- coordinate would become the watermark and hide the head.
DO $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM events dead
    CROSS JOIN LATERAL (
      SELECT live.created_at, live.id FROM events live
      WHERE live.community_id = dead.community_id AND live.kind = dead.kind
        AND live.pubkey = dead.pubkey AND live.d_tag = dead.d_tag
        AND live.deleted_at IS NULL
      ORDER BY live.created_at DESC, live.id ASC
      LIMIT 1) head
    WHERE dead.kind = 30078 AND dead.deleted_at IS NOT NULL
      AND nip_rs_read_state_row(dead.kind, dead.d_tag, dead.tags)
      AND (dead.created_at > head.created_at
           OR (dead.created_at = head.created_at AND dead.id < head.id)))
  THEN
    RAISE EXCEPTION 'NIP-RS retention blocked: deleted event outranks live head';
  END IF;
END $$;

-- 5. Seed the watermarks from live and deleted conforming rows.
INSERT INTO parameterized_event_watermarks (community_id, kind, pubkey, d_tag, created_at, event_id)
SELECT DISTINCT ON (community_id, kind, pubkey, d_tag) community_id, kind, pubkey, d_tag, created_at, id
FROM events WHERE kind = 30078 AND nip_rs_read_state_row(kind, d_tag, tags)
ORDER BY community_id, kind, pubkey, d_tag, created_at DESC, id ASC;

-- 6. The database rules. Triggers on the events parent are cloned onto every
-- partition, present and future.

-- Advance the watermark or refuse the row. Nonconforming rows pass untouched.
CREATE FUNCTION guard_nip_rs_watermark() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  advanced boolean;
  wm_created_at timestamptz;
  wm_event_id bytea;
BEGIN
  IF NOT nip_rs_read_state_row(NEW.kind, NEW.d_tag, NEW.tags) THEN
    RETURN NEW;
  END IF;
  INSERT INTO parameterized_event_watermarks AS wm (community_id, kind, pubkey, d_tag, created_at, event_id)
  VALUES (NEW.community_id, NEW.kind, NEW.pubkey, NEW.d_tag, NEW.created_at, NEW.id)
  ON CONFLICT (community_id, kind, pubkey, d_tag) DO UPDATE
    SET created_at = EXCLUDED.created_at, event_id = EXCLUDED.event_id
    WHERE EXCLUDED.created_at > wm.created_at
       OR (EXCLUDED.created_at = wm.created_at AND EXCLUDED.event_id < wm.event_id)
  RETURNING TRUE INTO advanced;
  IF advanced THEN
    RETURN NEW;
  END IF;
  -- Not advanced: the watermark row is locked by the upsert above.
  SELECT wm.created_at, wm.event_id INTO wm_created_at, wm_event_id
  FROM parameterized_event_watermarks wm
  WHERE wm.community_id = NEW.community_id AND wm.kind = NEW.kind
    AND wm.pubkey = NEW.pubkey AND wm.d_tag = NEW.d_tag;
  IF wm_created_at = NEW.created_at AND wm_event_id = NEW.id THEN
    RETURN NULL; -- the exact accepted tuple, live or deleted: insert nothing
  END IF;
  RAISE EXCEPTION 'stale NIP-RS event rejected by durable watermark' USING ERRCODE = 'check_violation';
END $$;

CREATE TRIGGER trg_events_nip_rs_watermark
  BEFORE INSERT ON events
  FOR EACH ROW
  WHEN (NEW.kind = 30078)
  EXECUTE FUNCTION guard_nip_rs_watermark();

-- A soft delete (replacement by an older binary, NIP-09, kind 9005) of a
-- conforming row becomes physical: the row first, its mention rows second.
-- The hard-delete opt-in is set for the two deletes only, transaction-locally,
-- and the caller's value ('' when it had none) is put back.
CREATE FUNCTION purge_soft_deleted_nip_rs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  prior text;
BEGIN
  IF NOT nip_rs_read_state_row(NEW.kind, NEW.d_tag, NEW.tags) THEN
    RETURN NULL;
  END IF;
  prior := COALESCE(current_setting('buzz.nip_rs_hard_delete', true), '');
  PERFORM set_config('buzz.nip_rs_hard_delete', 'on', true);
  DELETE FROM events WHERE community_id = NEW.community_id AND created_at = NEW.created_at AND id = NEW.id;
  DELETE FROM event_mentions WHERE community_id = NEW.community_id AND event_id = NEW.id;
  PERFORM set_config('buzz.nip_rs_hard_delete', prior, true);
  RETURN NULL;
END $$;

CREATE TRIGGER trg_events_purge_soft_deleted_nip_rs
  AFTER UPDATE OF deleted_at ON events
  FOR EACH ROW
  WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL AND NEW.kind = 30078)
  EXECUTE FUNCTION purge_soft_deleted_nip_rs();

-- Defence in depth: this relay writes mention rows in the event's own
-- transaction, where the payload is live. A kind 30078 mention row written
-- apart from its event, after the payload was replaced or deleted, is
-- skipped. FOR KEY SHARE takes the events row before the mention row, the
-- lock order of every other path.
CREATE FUNCTION guard_event_mention_live() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM events
  WHERE community_id = NEW.community_id AND id = NEW.event_id
    AND created_at = NEW.event_created_at AND deleted_at IS NULL
  FOR KEY SHARE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER trg_event_mentions_require_live_event
  BEFORE INSERT ON event_mentions
  FOR EACH ROW
  WHEN (NEW.event_kind = 30078)
  EXECUTE FUNCTION guard_event_mention_live();

-- The hard-delete fence. The WHEN clause ignores tags on purpose: a
-- nonconforming row at a read-state coordinate is fenced too; a row of
-- another kind with a read-state-shaped d is not.
CREATE FUNCTION guard_nip_rs_hard_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('buzz.nip_rs_hard_delete', true) IS DISTINCT FROM 'on' THEN
    RAISE EXCEPTION 'NIP-RS hard delete requires corrected writer opt-in' USING ERRCODE = 'check_violation';
  END IF;
  RETURN OLD;
END $$;

CREATE TRIGGER trg_events_guard_nip_rs_hard_delete
  BEFORE DELETE ON events
  FOR EACH ROW
  WHEN (OLD.kind = 30078 AND OLD.d_tag ~ '^read-state:[0-9a-f]{32}$')
  EXECUTE FUNCTION guard_nip_rs_hard_delete();
