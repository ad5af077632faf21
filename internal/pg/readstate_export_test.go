package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateTo is Migrate in MigrateApply mode that stops after the file
// numbered version: the same lock, ledger, checksum verification and
// per-file transaction, for tests that need a database at an older schema
// version. It returns the names of the files it applied.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int) ([]string, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate to %d: acquire connection: %w", version, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return nil, fmt.Errorf("migrate to %d: take advisory lock: %w", version, err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey) //nolint:errcheck // released with the session otherwise
	if _, err := conn.Exec(ctx, ledgerDDL); err != nil {
		return nil, fmt.Errorf("migrate to %d: create ledger: %w", version, err)
	}
	ledger, err := readLedger(ctx, conn)
	if err != nil {
		return nil, err
	}
	pending, err := verify(Migrations(), ledger)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range pending {
		if m.Version > version {
			break
		}
		if err := applyOne(ctx, conn, m); err != nil {
			return applied, err
		}
		applied = append(applied, m.Name)
	}
	return applied, nil
}
