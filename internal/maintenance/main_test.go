package maintenance

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// logBuffer collects log lines for assertions; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testBundle struct {
	pool *pgxpool.Pool
	url  string
	logs *logBuffer
	log  *slog.Logger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, url := dbtest.NewDB(t)
	logs := &logBuffer{}
	return &testBundle{pool: pool, url: url, logs: logs,
		log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}
