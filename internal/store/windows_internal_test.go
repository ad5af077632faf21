package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
)

// TestWindowTargetGuard shows why the aux statement's positional test
// guards on jsonb_typeof: a stored event whose tags are not an array (an
// imported row, or one written before validation) must match nothing
// rather than fail the statement, whichever test the planner runs first.
// Run without the containment prefilter, over every row of the
// community, the unguarded jsonb_array_elements would raise "cannot
// extract elements from an object".
func TestWindowTargetGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	var cid string
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO communities (host) VALUES ($1) RETURNING id::text`,
		"guard-"+rand.Text()[:10]+".test").Scan(&cid))
	target := hex.EncodeToString([]byte(rand.Text()[:16] + rand.Text()[:16]))
	insert := func(name, tags string) {
		_, err := tx.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
			VALUES ($1, sha256(convert_to($2, 'UTF8')), sha256(convert_to('author', 'UTF8')), now(), 7, $3::jsonb, '+',
			        sha512(convert_to('sig', 'UTF8')))`, cid, name, tags)
		require.NoError(t, err, tags)
	}
	insert("reaction", `[["e", "`+target+`"]]`)
	for i, tags := range []string{`{"e": "` + target + `"}`, `"e"`, `null`, `7`} {
		insert("odd"+string(rune('0'+i)), tags)
	}
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM events e WHERE e.community_id = $1 AND `+windowTargetTest("$2"),
		cid, []string{target}).Scan(&n))
	require.Equal(t, 1, n, "only the reaction's array of tags targets the row")
}
