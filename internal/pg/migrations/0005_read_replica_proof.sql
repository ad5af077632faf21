-- 0005_read_replica_proof: what lets a streaming read replica serve a read
-- only when it provably holds every row the read can return (spec 50 §7.3,
-- §7.4; spec 70 §8). Additive: one function, one trigger, one table.
--
-- events_created_at_floor is a deferred constraint trigger on events (on the
-- parent, so PostgreSQL clones it onto every partition, present and future).
-- On a connection that sets buzz.created_at_floor to a number of seconds
-- (the relay's writer pool sets '960' when READ_DATABASE_URL is set), a row
-- with a channel_id whose created_at is more than that many seconds before
-- the commit fails at COMMIT with SQLSTATE 23514 (check_violation, constraint
-- events_created_at_floor); ingest answers it with "invalid: event timestamp
-- too far from server time". Consequence: every channel row with
-- created_at <= U has committed by writer time U + 960 s. Connections that
-- do not set it (migrations, operator commands, manual SQL, imports) are not
-- checked and are outside the proof. Soft deletes update deleted_at only and
-- never fire it; channel-less rows are skipped by the WHEN clause.
--
-- replica_heartbeat holds one row (token = 1), rewritten every 5 s by the
-- probe of every relay process on the writer: beat_at is the now() of the
-- heartbeat transaction and safe_through = beat_at - 965 s (the floor plus
-- 5 s for second truncation and commit processing). A replica snapshot that
-- holds the version with beat_at = H holds every transaction that committed
-- before H, so it holds every channel row with created_at <= safe_through.
-- The table is deployment-wide, so it is registered as operator-global.
--
-- CREATE TRIGGER takes a SHARE ROW EXCLUSIVE lock on events and each
-- partition for a moment (reads go on, writes wait); lock_timeout makes the
-- migration fail fast instead of queueing behind a long writer. Rerun it
-- then: nothing was applied.

SET LOCAL lock_timeout = '5s';

CREATE FUNCTION events_created_at_floor_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  floor_seconds text := current_setting('buzz.created_at_floor', true);
BEGIN
  IF floor_seconds IS NULL OR floor_seconds = '' OR NEW.channel_id IS NULL THEN
    RETURN NULL;
  END IF;
  IF NEW.created_at < clock_timestamp() - make_interval(secs => floor_seconds::double precision) THEN
    RAISE EXCEPTION 'event created_at % is more than % s before its commit', NEW.created_at, floor_seconds
      USING ERRCODE = 'check_violation', CONSTRAINT = 'events_created_at_floor',
            SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME;
  END IF;
  RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER events_created_at_floor
  AFTER INSERT OR UPDATE OF created_at, channel_id ON events
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW
  WHEN (NEW.channel_id IS NOT NULL)
  EXECUTE FUNCTION events_created_at_floor_guard();

CREATE TABLE replica_heartbeat (
    token        SMALLINT    PRIMARY KEY DEFAULT 1 CHECK (token = 1),
    safe_through TIMESTAMPTZ NOT NULL,
    beat_at      TIMESTAMPTZ NOT NULL
);

INSERT INTO _operator_global_tables (table_name, reason) VALUES
    ('replica_heartbeat', 'one row for the whole deployment: the read replica proof (spec 70 §8)');
