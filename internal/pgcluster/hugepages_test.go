package pgcluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/pgcluster"
)

// The start's record of the shared memory's pages (docs/OPERATIONS.md
// "Huge pages"), from /proc texts as the kernel writes them.
func TestHugePagesNote(t *testing.T) {
	t.Parallel()
	const none = "HugePages_Total:       0\nHugePages_Free:        0\nHugepagesize:       2048 kB\n"
	attrs := func(as []slog.Attr) map[string]string {
		m := map[string]string{}
		for _, a := range as {
			m[a.Key] = a.Value.String()
		}
		return m
	}

	level, msg, as := pgcluster.HugePagesNote("Name:\tpostgres\nHugetlbPages:\t 6291456 kB\n",
		"HugePages_Total:    3500\nHugePages_Free:      410\n", 3090)
	require.Equal(t, slog.LevelInfo, level)
	require.Equal(t, "shared memory on huge pages", msg)
	require.Equal(t, "3090", attrs(as)["huge_pages"])

	level, msg, as = pgcluster.HugePagesNote("Name:\tpostgres\nHugetlbPages:\t       0 kB\n", none, 3090)
	require.Equal(t, slog.LevelInfo, level)
	require.Equal(t, "shared memory on normal pages: the machine reserves no huge pages", msg)
	require.Equal(t, "3090", attrs(as)["huge_pages_needed"])
	require.Equal(t, "sysctl -w vm.nr_hugepages=3090", attrs(as)["to_reserve"])

	// 1000 reserved, 600 of them held by another program: PostgreSQL fell
	// back, and the advice keeps the others' 600.
	level, msg, as = pgcluster.HugePagesNote("HugetlbPages:\t0 kB\n",
		"HugePages_Total:    1000\nHugePages_Free:      400\n", 3090)
	require.Equal(t, slog.LevelWarn, level)
	require.Equal(t, "shared memory on normal pages: too few huge pages free", msg)
	require.Equal(t, "sysctl -w vm.nr_hugepages=3690", attrs(as)["to_reserve"])
	require.Equal(t, "400", attrs(as)["huge_pages_free"])

	// A server that cannot tell what it needs: nothing to say on normal pages.
	_, msg, _ = pgcluster.HugePagesNote("HugetlbPages:\t0 kB\n", none, 0)
	require.Empty(t, msg)
	// A kernel without the field counts as normal pages.
	_, msg, _ = pgcluster.HugePagesNote("Name:\tpostgres\n", none, 12)
	require.Equal(t, "shared memory on normal pages: the machine reserves no huge pages", msg)
}

// A real start logs which pages it got, and on normal pages the count that
// would hold its shared memory: a little more than shared_buffers in 2 MB
// pages. Which of the two records a machine gives depends on its
// vm.nr_hugepages, which a test must not change.
func TestStartReportsHugePages(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Config{
		DataDir: filepath.Join(t.TempDir(), "buzz-data"), Settings: map[string]string{"fsync": "off"},
		Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	var rec map[string]any
	for line := range bytes.SplitSeq([]byte(buf.String()), []byte("\n")) {
		var r map[string]any
		if json.Unmarshal(line, &r) == nil && strings.HasPrefix(r["msg"].(string), "shared memory on ") {
			require.Nil(t, rec, "one record a start")
			rec = r
		}
	}
	require.NotNil(t, rec, "the start's record of its shared memory's pages in:\n%s", buf.String())
	t.Logf("%s: %v", rec["level"], rec)

	sharedMB, err := strconv.ParseInt(strings.TrimSuffix(showSetting(t, c.URL(), "shared_buffers"), "MB"), 10, 64)
	require.NoError(t, err)
	meminfo, err := os.ReadFile("/proc/meminfo")
	require.NoError(t, err)
	key := "huge_pages_needed"
	if rec["msg"] == "shared memory on huge pages" {
		key = "huge_pages"
	}
	need := int64(rec[key].(float64))
	require.GreaterOrEqual(t, need, sharedMB/2, "shared memory holds shared_buffers")
	require.Less(t, need, sharedMB/2+sharedMB/10+64, "and not much more")
	if key == "huge_pages" {
		return
	}
	if strings.Contains(string(meminfo), "HugePages_Total:       0\n") {
		require.Equal(t, "shared memory on normal pages: the machine reserves no huge pages", rec["msg"])
		require.Equal(t, "sysctl -w vm.nr_hugepages="+strconv.FormatInt(need, 10), rec["to_reserve"])
		return
	}
	// Some reserved, and PostgreSQL fell back: too few were free.
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, "shared memory on normal pages: too few huge pages free", rec["msg"])
}
