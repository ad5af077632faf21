package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/export"
	"github.com/buzz-relay/buzz/internal/fixture"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// sha256 of no bytes: the trailer of an export without events.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// An empty community with a relay key but no chain: a header and a
// trailer, no_checkpoint naming the empty chain, and the hash of no bytes.
func TestRunEmpty(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	com := fixture.Community(t, pool)
	var out bytes.Buffer
	h, tr, err := export.Run(context.Background(), export.Params{Pool: pool, CommunityID: com.ID, Host: com.Host,
		RelayKey: event.GenerateKey(), Now: time.Now()}, &out)
	require.NoError(t, err)
	require.Equal(t, export.Trailer{Type: "trailer", Events: 0, SHA256: emptySHA256}, tr)
	require.Nil(t, h.Audit)
	require.Equal(t, export.NoChain, h.NoCheckpoint)
	require.Nil(t, h.Checkpoint)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &raw))
	require.Nil(t, raw["audit"], "stated as null")
	require.Contains(t, raw, "audit")
	require.JSONEq(t, `{"type":"trailer","events":0,"sha256":"`+emptySHA256+`"}`, lines[1])
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

var errFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errFull
	}
	w.n -= len(p)
	return len(p), nil
}

// A write that fails midway is returned as a WriteError wrapping it.
func TestRunWriteFails(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	com := fixture.Community(t, pool)
	key := eventtest.NewKey()
	for i := range 2 * export.Batch {
		fixture.Event(t, pool, com.ID, key, 1, eventtest.Content(strconv.Itoa(i)+strings.Repeat("x", 512)))
	}
	_, _, err := export.Run(context.Background(), export.Params{Pool: pool, CommunityID: com.ID, Host: com.Host, Now: time.Now()},
		&failingWriter{n: 1 << 17})
	var we *export.WriteError
	require.ErrorAs(t, err, &we)
	require.ErrorIs(t, err, errFull)
}
