package replica

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// floorTriggerDef is pg_get_triggerdef of the floor trigger on events, as
// migration 0012 creates it: queued only on a connection that armed the
// floor, which verifyArmed checks the writer pool does.
const floorTriggerDef = "CREATE CONSTRAINT TRIGGER events_created_at_floor AFTER INSERT OR UPDATE OF created_at, channel_id " +
	"ON public.events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW " +
	"WHEN (((new.channel_id IS NOT NULL) AND (current_setting('buzz.created_at_floor'::text, true) <> ''::text))) " +
	"EXECUTE FUNCTION events_created_at_floor_guard()"

// heartbeatColumns is the shape of replica_heartbeat, column by column.
const heartbeatColumns = "token smallint, safe_through timestamp with time zone, beat_at timestamp with time zone"

// Verify is the start-time fence check of docs/PROTOCOL.md §16.6: the writer
// pool is armed (buzz.created_at_floor is Floor on its connections), the
// floor trigger is on events with its migration's definition and enabled
// on every partition, and replica_heartbeat has its shape. An error says
// which part is missing; the relay then keeps every read on the writer.
// It reads the writer only, so a replica that is down does not fail it.
func (r *Replica) Verify(ctx context.Context) error {
	if err := r.verifyArmed(ctx); err != nil {
		return err
	}
	if err := r.verifyTrigger(ctx); err != nil {
		return err
	}
	var cols *string
	err := r.cfg.Writer.QueryRow(ctx, `SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
		FROM pg_attribute WHERE attrelid = to_regclass('public.replica_heartbeat') AND attnum > 0 AND NOT attisdropped`).Scan(&cols)
	if err != nil {
		return fmt.Errorf("read replica fence: look up replica_heartbeat: %w", err)
	}
	if cols == nil {
		return errors.New("read replica fence: table replica_heartbeat is missing; run buzz-relay migrate")
	}
	if *cols != heartbeatColumns {
		return fmt.Errorf("read replica fence: table replica_heartbeat has another shape (%s)", *cols)
	}
	return nil
}

func (r *Replica) verifyArmed(ctx context.Context) error {
	want := strconv.FormatInt(int64(Floor.Seconds()), 10)
	var got *string
	if err := r.cfg.Writer.QueryRow(ctx, "SELECT current_setting('buzz.created_at_floor', true)").Scan(&got); err != nil {
		return fmt.Errorf("read replica fence: read buzz.created_at_floor: %w", err)
	}
	if got == nil || *got != want {
		return fmt.Errorf("read replica fence: the writer pool is not armed (buzz.created_at_floor is %s, want %q)", quoted(got), want)
	}
	return nil
}

func (r *Replica) verifyTrigger(ctx context.Context) error {
	var (
		oid     uint32
		def     string
		enabled string
	)
	err := r.cfg.Writer.QueryRow(ctx, `SELECT t.oid, pg_get_triggerdef(t.oid), t.tgenabled::text FROM pg_trigger t
		WHERE t.tgrelid = 'public.events'::regclass AND t.tgname = 'events_created_at_floor'`).Scan(&oid, &def, &enabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return errors.New("read replica fence: trigger events_created_at_floor is missing on events; run buzz-relay migrate")
	}
	if err != nil {
		return fmt.Errorf("read replica fence: look up trigger events_created_at_floor: %w", err)
	}
	if def != floorTriggerDef {
		return fmt.Errorf("read replica fence: trigger events_created_at_floor has another definition: %s", def)
	}
	if enabled != "O" && enabled != "A" {
		return errors.New("read replica fence: trigger events_created_at_floor is disabled on events")
	}
	rows, err := r.cfg.Writer.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'public.events'::regclass
		  AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgparentid = $1 AND t.tgenabled IN ('O', 'A'))
		ORDER BY 1`, oid)
	if err != nil {
		return fmt.Errorf("read replica fence: look up partitions: %w", err)
	}
	unguarded, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read replica fence: look up partitions: %w", err)
	}
	if len(unguarded) > 0 {
		return fmt.Errorf("read replica fence: trigger events_created_at_floor is missing or disabled on %s", strings.Join(unguarded, ", "))
	}
	return nil
}

// quoted is the setting as %q would print it, or "unset".
func quoted(s *string) string {
	if s == nil {
		return "unset"
	}
	return strconv.Quote(*s)
}
