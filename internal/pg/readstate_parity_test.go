package pg_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
)

// paritySlot is a valid read-state d value.
const paritySlot = "read-state:0123456789abcdef0123456789abcdef"

// parityCase is one input of the classifier and the answer docs/PROTOCOL.md §14.1
// gives for it.
type parityCase struct {
	name string
	kind int
	d    string
	tags string
	want bool
}

// parityCorpus covers every row of docs/PROTOCOL.md §14.1 and its negation, tags that
// are not arrays, tag elements that are not arrays, d values that are not
// strings, null elements and the nonconforming examples of docs/PROTOCOL.md §14.1.
func parityCorpus() []parityCase {
	s := paritySlot
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	d := `["d",` + q(s) + `]`
	tt := `["t","read-state"]`
	arr := func(elems ...string) string { return "[" + strings.Join(elems, ",") + "]" }
	return []parityCase{
		// All six hold.
		{"Conforming", 30078, s, arr(d, tt), true},
		{"ConformingReversed", 30078, s, arr(tt, d), true},
		{"ConformingWithOtherTags", 30078, s, arr(`["p","ab"]`, d, `["t","other"]`, tt, `["alt","x"]`), true},
		{"ConformingDWithThirdElement", 30078, s, arr(`["d",`+q(s)+`,"extra"]`, tt), true},
		{"ConformingAllDigitsSlot", 30078, "read-state:" + strings.Repeat("7", 32), arr(`["d","read-state:`+strings.Repeat("7", 32)+`"]`, tt), true},
		{"ConformingNullElement", 30078, s, arr("null", d, tt), true},
		{"ConformingNonArrayElements", 30078, s, arr(`"d"`, `{"0":"d"}`, `42`, `true`, d, tt), true},
		{"ConformingEmptyElement", 30078, s, arr(`[]`, d, tt), true},
		{"ConformingArrayAsTagName", 30078, s, arr(`[["d"],`+q(s)+`]`, d, tt), true},
		{"ConformingNullTagName", 30078, s, arr(`[null,`+q(s)+`]`, d, tt), true},
		{"ConformingEscapedNames", 30078, s, arr(`["\u0064","\u0072ead-state:0123456789abcdef0123456789abcdef"]`, `["t","read\u002dstate"]`), true},
		{"ConformingLongTNextToExactT", 30078, s, arr(d, `["t","read-state","x"]`, tt), true},
		{"ConformingWhitespace", 30078, s, "[ [ \"d\" , " + q(s) + " ] ,\n\t[\"t\",\"read-state\"] ]", true},

		// 1: kind.
		{"Kind30077", 30077, s, arr(d, tt), false},
		{"Kind30023", 30023, s, arr(d, tt), false},
		{"Kind1", 1, s, arr(d, tt), false},
		{"Kind0", 0, s, arr(d, tt), false},

		// 2: d_tag shape.
		{"UppercaseSlot", 30078, "read-state:0123456789ABCDEF0123456789ABCDEF", arr(`["d","read-state:0123456789ABCDEF0123456789ABCDEF"]`, tt), false},
		{"MixedCaseSlot", 30078, "read-state:0123456789abcdef0123456789abcdeF", arr(`["d","read-state:0123456789abcdef0123456789abcdeF"]`, tt), false},
		{"Slot31", 30078, s[:len(s)-1], arr(`["d",`+q(s[:len(s)-1])+`]`, tt), false},
		{"Slot33", 30078, s + "0", arr(`["d",`+q(s+"0")+`]`, tt), false},
		{"SlotNotHex", 30078, "read-state:0123456789abcdef0123456789abcdeg", arr(`["d","read-state:0123456789abcdef0123456789abcdeg"]`, tt), false},
		{"NoPrefix", 30078, "0123456789abcdef0123456789abcdef", arr(`["d","0123456789abcdef0123456789abcdef"]`, tt), false},
		{"OtherPrefix", 30078, "read_state:0123456789abcdef0123456789abcdef", arr(`["d","read_state:0123456789abcdef0123456789abcdef"]`, tt), false},
		{"UppercasePrefix", 30078, "READ-STATE:0123456789abcdef0123456789abcdef", arr(`["d","READ-STATE:0123456789abcdef0123456789abcdef"]`, tt), false},
		{"LeadingSpace", 30078, " " + s, arr(`["d",`+q(" "+s)+`]`, tt), false},
		{"TrailingNewline", 30078, s + "\n", arr(`["d",`+q(s+"\n")+`]`, tt), false},
		{"EmbeddedNewline", 30078, "x\n" + s, arr(`["d",`+q("x\n"+s)+`]`, tt), false},
		{"EmptyD", 30078, "", arr(`["d",""]`, tt), false},
		{"AppDataD", 30078, "com.example.settings", arr(`["d","com.example.settings"]`, tt), false},

		// 3: tags not an array count as [].
		{"TagsObject", 30078, s, `{"d":` + q(s) + `,"t":"read-state"}`, false},
		{"TagsString", 30078, s, q(arr(d, tt)), false},
		{"TagsNumber", 30078, s, `42`, false},
		{"TagsNull", 30078, s, `null`, false},
		{"TagsTrue", 30078, s, `true`, false},
		{"TagsEmpty", 30078, s, `[]`, false},

		// 4: exactly one d tag.
		{"NoDTag", 30078, s, arr(tt), false},
		{"TwoIdenticalD", 30078, s, arr(d, d, tt), false},
		{"TwoDifferentD", 30078, s, arr(d, `["d","read-state:ffffffffffffffffffffffffffffffff"]`, tt), false},
		{"OneElementDNextToValid", 30078, s, arr(`["d"]`, d, tt), false},
		{"OneElementDAfterValid", 30078, s, arr(d, tt, `["d"]`), false},
		{"DWithNumberNextToValid", 30078, s, arr(d, `["d",1]`, tt), false},
		{"DWithThirdElementNextToValid", 30078, s, arr(d, `["d",`+q(s)+`,"x"]`, tt), false},
		{"UppercaseDName", 30078, s, arr(`["D",`+q(s)+`]`, tt), false},
		{"NestedD", 30078, s, arr(`[["d",`+q(s)+`]]`, tt), false},

		// 5: the d tag's value is d_tag, as a string.
		{"OnlyOneElementD", 30078, s, arr(`["d"]`, tt), false},
		{"DValueDiffers", 30078, s, arr(`["d","read-state:ffffffffffffffffffffffffffffffff"]`, tt), false},
		{"DValueTrailingSpace", 30078, s, arr(`["d",`+q(s+" ")+`]`, tt), false},
		{"DValueUppercase", 30078, s, arr(`["d",`+q(strings.ToUpper(s))+`]`, tt), false},
		{"DValueNumber", 30078, s, arr(`["d",123]`, tt), false},
		{"DValueNull", 30078, s, arr(`["d",null]`, tt), false},
		{"DValueTrue", 30078, s, arr(`["d",true]`, tt), false},
		{"DValueArray", 30078, s, arr(`["d",[`+q(s)+`]]`, tt), false},
		{"DValueObject", 30078, s, arr(`["d",{"v":`+q(s)+`}]`, tt), false},

		// 6: exactly one tag that is exactly ["t","read-state"].
		{"NoTTag", 30078, s, arr(d), false},
		{"TwoExactT", 30078, s, arr(d, tt, tt), false},
		{"LongTOnly", 30078, s, arr(d, `["t","read-state","x"]`), false},
		{"ShortT", 30078, s, arr(d, `["t"]`), false},
		{"TValueOther", 30078, s, arr(d, `["t","Read-State"]`), false},
		{"TValueTrailingSpace", 30078, s, arr(d, `["t","read-state "]`), false},
		{"TNameUppercase", 30078, s, arr(d, `["T","read-state"]`), false},
		{"TValueArray", 30078, s, arr(d, `["t",["read-state"]]`), false},
		{"TObject", 30078, s, arr(d, `{"t":"read-state"}`), false},
		{"TAsString", 30078, s, arr(d, `"read-state"`), false},
		{"NestedT", 30078, s, arr(d, `[["t","read-state"]]`), false},
	}
}

// The Go classifier and nip_rs_read_state_row agree on
// every input, and both give the answer of docs/PROTOCOL.md §14.1.
func TestReadStateClassifierParity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	corpus := parityCorpus()
	require.GreaterOrEqual(t, len(corpus), 40)

	sqlRow := func(kind *int, d, tags *string) *bool {
		t.Helper()
		var got *bool
		require.NoError(t, tx.QueryRow(ctx, "SELECT nip_rs_read_state_row($1, $2, $3::jsonb)", kind, d, tags).Scan(&got))
		return got
	}

	typed := 0
	for _, tc := range corpus {
		require.True(t, json.Valid([]byte(tc.tags)), tc.name)
		inSQL := sqlRow(&tc.kind, &tc.d, &tc.tags)
		require.NotNil(t, inSQL, "%s: never NULL", tc.name)
		inGo := event.ReadStateRow(tc.kind, tc.d, json.RawMessage(tc.tags))
		require.Equal(t, *inSQL, inGo, "%s: SQL %v, Go %v for kind %d d %q tags %s", tc.name, *inSQL, inGo, tc.kind, tc.d, tc.tags)
		require.Equal(t, tc.want, inGo, "%s", tc.name)

		// Layouts a typed event can carry (every tag an array of strings,
		// d_tag its first d tag's value, as the store records it) go
		// through event.IsReadState as well.
		var tags event.Tags
		if json.Unmarshal([]byte(tc.tags), &tags) != nil || tags.First("d").Value() != tc.d {
			continue
		}
		typed++
		ev := &event.Event{Kind: tc.kind, Tags: tags}
		require.Equal(t, *inSQL, event.IsReadState(ev), "%s: typed event", tc.name)
	}
	require.GreaterOrEqual(t, typed, 30, "typed events checked")

	// NULL inputs give false, never NULL.
	kind, d, tags := 30078, paritySlot, rsTags(paritySlot)
	for name, args := range map[string][3]any{
		"NullKind": {nil, &d, &tags},
		"NullD":    {&kind, nil, &tags},
		"NullTags": {&kind, &d, nil},
		"AllNull":  {nil, nil, nil},
	} {
		var got *bool
		require.NoError(t, tx.QueryRow(ctx, "SELECT nip_rs_read_state_row($1::int, $2::text, $3::jsonb)", args[0], args[1], args[2]).Scan(&got))
		require.NotNil(t, got, name)
		require.False(t, *got, name)
	}

	// The function is declared as migration 0006 declares it.
	var volatility string
	var parallel string
	var strict bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT provolatile::text, proparallel::text, proisstrict FROM pg_proc
		WHERE oid = 'nip_rs_read_state_row(integer, text, jsonb)'::regprocedure`).Scan(&volatility, &parallel, &strict))
	require.Equal(t, "i", volatility, "IMMUTABLE")
	require.Equal(t, "s", parallel, "PARALLEL SAFE")
	require.False(t, strict, "NULL inputs answer false, not NULL")
}
