package read_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/read"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func snapshotFilters(t *testing.T, raw string) []event.Filter {
	t.Helper()
	var objs []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(raw), &objs))
	out := make([]event.Filter, len(objs))
	for i, o := range objs {
		f, err := event.ParseFilter(o)
		require.NoError(t, err)
		out[i] = f
	}
	return out
}

// TestReadStateSnapshotClassifier stores one row per tag layout, each
// under a pubkey of its own, and takes each pubkey's snapshot: the
// statement's written-out classifier must select exactly the rows
// event.ReadStateRow calls conforming (a row it selects and Go rejects is
// a 503; a row it misses is an empty snapshot), and a conforming row whose
// tags are not arrays of strings must be a 503, never an altered event.
func TestReadStateSnapshotClassifier(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	engine := read.New(read.Config{Pool: pool})
	cid := fixture.Community(t, pool).ID
	type want int
	const (
		selected want = iota
		excluded
		corrupt
	)
	cases := []struct {
		name string
		// dTag and tags use %D for "read-state:<slot>" and %S for the slot.
		dTag, tags string
		want       want
	}{
		{"Plain", "%D", `[["d","%D"],["t","read-state"]]`, selected},
		{"TFirst", "%D", `[["t","read-state"],["d","%D"]]`, selected},
		{"OtherTags", "%D", `[["p","x"],["d","%D"],["t","read-state"],["t","other"]]`, selected},
		{"LongD", "%D", `[["d","%D","extra"],["t","read-state"]]`, selected},
		{"EmptyTag", "%D", `[["d","%D"],["t","read-state"],[]]`, selected},
		{"NoT", "%D", `[["d","%D"]]`, excluded},
		{"TwoT", "%D", `[["d","%D"],["t","read-state"],["t","read-state"]]`, excluded},
		{"TThree", "%D", `[["d","%D"],["t","read-state","x"]]`, excluded},
		{"TCase", "%D", `[["d","%D"],["t","Read-State"]]`, excluded},
		{"TSpace", "%D", `[["d","%D"],["t","read-state "]]`, excluded},
		{"TNameCase", "%D", `[["d","%D"],["T","read-state"]]`, excluded},
		{"TValueArray", "%D", `[["d","%D"],["t",["read-state"]]]`, excluded},
		{"TwoD", "%D", `[["d","%D"],["d","%D"],["t","read-state"]]`, excluded},
		{"BareD", "%D", `[["d"],["d","%D"],["t","read-state"]]`, excluded},
		{"BareDAfter", "%D", `[["d","%D"],["t","read-state"],["d"]]`, excluded},
		{"NumericD", "%D", `[["d",5],["d","%D"],["t","read-state"]]`, excluded},
		{"DValueArray", "%D", `[["d",["%D"]],["t","read-state"]]`, excluded},
		{"DNameCase", "%D", `[["D","%D"],["t","read-state"]]`, excluded},
		{"DMismatch", "%D", `[["d","read-state:` + strings.Repeat("0", 32) + `"],["t","read-state"]]`, excluded},
		{"NoD", "%D", `[["t","read-state"]]`, excluded},
		{"Object", "%D", `{"d":"%D","t":"read-state"}`, excluded},
		{"String", "%D", `"[[\"d\",\"%D\"],[\"t\",\"read-state\"]]"`, excluded},
		{"Null", "%D", `null`, excluded},
		{"Empty", "%D", `[]`, excluded},
		{"UpperSlot", "read-state:%U", `[["d","read-state:%U"],["t","read-state"]]`, excluded},
		{"ShortSlot", "read-state:%31", `[["d","read-state:%31"],["t","read-state"]]`, excluded},
		{"LongSlot", "%D0", `[["d","%D0"],["t","read-state"]]`, excluded},
		{"Prefixed", "x%D", `[["d","x%D"],["t","read-state"]]`, excluded},
		{"OtherPrefix", "readstate:%S", `[["d","readstate:%S"],["t","read-state"]]`, excluded},
		{"TrailingNewline", "%D\n", `[["d","%D\n"],["t","read-state"]]`, excluded},
		{"FullwidthDigit", "read-state:%31０", `[["d","read-state:%31０"],["t","read-state"]]`, excluded},
		{"NonStringTagName", "%D", `[[5,"d"],["d","%D"],["t","read-state"]]`, corrupt},
		{"LooseString", "%D", `[["d","%D"],["t","read-state"],"loose"]`, corrupt},
		{"NestedArray", "%D", `[[["d"]],["d","%D"],["t","read-state"]]`, corrupt},
		{"ObjectElement", "%D", `[["d","%D"],["t","read-state"],{"d":1}]`, corrupt},
		{"NullElement", "%D", `[["d","%D"],["t","read-state"],null]`, corrupt},
		{"NullValue", "%D", `[["d","%D"],["t","read-state"],["x",null]]`, corrupt},
		{"NumberValue", "%D", `[["d","%D"],["t","read-state"],["x",1]]`, corrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := randomHex(16)
			expand := strings.NewReplacer("%D", "read-state:"+s, "%S", s, "%U", strings.ToUpper(s), "%31", s[:31]).Replace
			dTag, tags := expand(tc.dTag), expand(tc.tags)
			goSays := event.ReadStateRow(event.KindAppData, dTag, json.RawMessage(tags))
			require.Equal(t, tc.want != excluded, goSays, "the case's expectation agrees with event.ReadStateRow")
			pub := randomHex(32)
			id := randomHex(32)
			_, err := pool.Exec(context.Background(), `
				INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag)
				VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), now(), 30078, $4::jsonb, 'c', decode(repeat('ab', 64), 'hex'), $5)`,
				cid, id, pub, tags, dTag)
			require.NoError(t, err)
			snap, err := engine.ReadStateSnapshot(context.Background(), read.Scope{CommunityID: cid, Reader: pub}, "",
				snapshotFilters(t, `[{"kinds":[30078],"authors":["`+pub+`"],"read_state_snapshot":1}]`))
			switch tc.want {
			case selected:
				require.NoError(t, err)
				require.Len(t, snap.Events, 1)
				require.Equal(t, id, snap.Events[0].ID)
				var stored, sent any
				require.NoError(t, json.Unmarshal([]byte(tags), &stored))
				require.NoError(t, json.Unmarshal(snap.Events[0].AppendJSON(nil), &sent))
				require.Equal(t, stored, sent.(map[string]any)["tags"], "the tags are sent as stored")
			case excluded:
				require.NoError(t, err)
				require.Empty(t, snap.Events)
				require.Equal(t, "[]", string(snap.EventsJSON))
			case corrupt:
				var se *read.SnapshotError
				require.True(t, errors.As(err, &se), "%v", err)
				require.Equal(t, read.SnapshotUnavailable, se.Code)
				require.Nil(t, snap)
			}
		})
	}
}

// TestReadStateSnapshotRefusals checks that every refusal is a
// SnapshotInvalid decided before any statement: the engine's pool is
// closed, so a request that got as far as the database would fail as
// SnapshotUnavailable instead.
func TestReadStateSnapshotRefusals(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	engine := read.New(read.Config{Pool: pool})
	me := randomHex(32)
	pool.Close()
	for name, raw := range map[string]string{
		"TwoFilters":  `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":1},{"kinds":[1]}]`,
		"Value":       `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":2}]`,
		"Limit":       `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":1,"limit":1}]`,
		"Kind":        `[{"kinds":[1],"authors":["` + me + `"],"read_state_snapshot":1}]`,
		"OtherAuthor": `[{"kinds":[30078],"authors":["` + randomHex(32) + `"],"read_state_snapshot":1}]`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs := snapshotFilters(t, raw)
			require.True(t, read.WantsSnapshot(fs))
			_, err := engine.ReadStateSnapshot(context.Background(), read.Scope{CommunityID: "00000000-0000-4000-8000-000000000000", Reader: me}, "", fs)
			var se *read.SnapshotError
			require.True(t, errors.As(err, &se), "%v", err)
			require.Equal(t, read.SnapshotInvalid, se.Code, se.Reason)
		})
	}
	t.Run("Served", func(t *testing.T) {
		t.Parallel()
		_, err := engine.ReadStateSnapshot(context.Background(), read.Scope{CommunityID: "00000000-0000-4000-8000-000000000000", Reader: me}, "",
			snapshotFilters(t, `[{"kinds":[30078],"authors":["`+me+`"],"read_state_snapshot":1}]`))
		var se *read.SnapshotError
		require.True(t, errors.As(err, &se), "%v", err)
		require.Equal(t, read.SnapshotUnavailable, se.Code, "the well-formed request reaches the (closed) database")
		require.Error(t, se.Err)
	})
	require.False(t, read.WantsSnapshot(snapshotFilters(t, `[{"kinds":[30078],"authors":["`+me+`"]}]`)))
}
