-- 0012: less work for every event written (docs/PERFORMANCE.md, "What each
-- index and trigger costs an insert", where each change below is measured).
--
-- The created_at floor of 0005 is queued for every channel row and then
-- returns at once unless the writer armed it (buzz.created_at_floor, set on
-- the writer's connections only when a read replica is configured). Its
-- WHEN clause now tests the setting too, at the row's insert or update, so
-- an unarmed writer queues nothing. The guarantee is unchanged: an armed
-- connection sets the floor when it opens, before any statement, so every
-- row it writes is queued and checked at commit as before.
--
-- The foreign keys from events, event_mentions and audit_outbox to
-- communities are dropped. Each checked every row against the one
-- communities row and took a KEY SHARE lock on it, so every writer of a
-- community locked the same row. No path deletes a community, and every
-- writer takes its community id from the communities table (the host
-- resolver, the importer after it creates the row, the operator commands),
-- so the keys guarded nothing the relay can do; the smaller tables keep
-- theirs.
--
-- Replacing the trigger and dropping the keys take short ACCESS EXCLUSIVE
-- and SHARE ROW EXCLUSIVE locks on events and its partitions; lock_timeout
-- makes the migration fail fast instead of queueing behind a long writer.
-- Rerun it then: nothing was applied.
SET LOCAL lock_timeout = '5s';

DROP TRIGGER events_created_at_floor ON events;

CREATE CONSTRAINT TRIGGER events_created_at_floor
  AFTER INSERT OR UPDATE OF created_at, channel_id ON events
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW
  WHEN (NEW.channel_id IS NOT NULL AND current_setting('buzz.created_at_floor', true) <> '')
  EXECUTE FUNCTION events_created_at_floor_guard();

ALTER TABLE events DROP CONSTRAINT events_community_id_fkey;
ALTER TABLE event_mentions DROP CONSTRAINT event_mentions_community_id_fkey;
ALTER TABLE audit_outbox DROP CONSTRAINT audit_outbox_community_id_fkey;
