package event

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// simpleObject is an event object as clients send it, with the two
// escapes and a non-ASCII letter content often has.
var simpleObject = `{"id":"` + strings.Repeat("a", 64) + `","pubkey":"` + strings.Repeat("b", 64) +
	`","created_at":1700000000,"kind":9,"tags":` + simpleTags + `,"content":"hi é \"there\"\nbye","sig":"` +
	strings.Repeat("c", 128) + `"}`

// simpleTags is simpleObject's tags.
var simpleTags = `[["h","general"],["e","` + strings.Repeat("e", 64) + `","","root"],["p","` + strings.Repeat("d", 64) + `"]]`

// with is simpleObject with its first old replaced by new.
func with(old, new string) string { return strings.Replace(simpleObject, old, new, 1) }

// simpleCases are objects parseSimple takes (true) and objects it leaves
// to the general path (false), among them every case its rules name.
var simpleCases = []struct {
	name   string
	object string
	simple bool
}{
	{"Plain", simpleObject, true},
	{"WhiteSpace", " \t\r\n" + strings.NewReplacer(`,"`, " ,\n\t\"", `":`, "\" :\r ", `],[`, "] , [").Replace(simpleObject) + " \n", true},
	{"NoTags", with(simpleTags, `[]`), true},
	{"EmptyTag", with(`["h","general"]`, `[]`), true},
	{"OtherOrder", `{"sig":"` + strings.Repeat("c", 128) + `","content":"","tags":[],"kind":0,"created_at":0,"pubkey":"` + strings.Repeat("b", 64) + `","id":"` + strings.Repeat("a", 64) + `"}`, true},
	{"Escapes", with(`hi é`, `\b\f\n\r\t\/\\\"\u0041\u00e9\u20ac\u0000 ok`), true},
	{"RawUnicode", with(`hi é`, "日本語 \U0001F600"), true},
	{"EscapedKey", with(`"kind"`, `"\u006bind"`), true},
	{"MaxKind", with(`"kind":9`, `"kind":65535`), true},
	{"ZeroKind", with(`"kind":9`, `"kind":0`), true},
	{"LongTime", with(`1700000000`, `999999999999999999`), true},

	{"KindTooLarge", with(`"kind":9`, `"kind":65536`), false},
	{"KindNegative", with(`"kind":9`, `"kind":-1`), false},
	{"KindMinusZero", with(`"kind":9`, `"kind":-0`), false},
	{"KindFraction", with(`"kind":9`, `"kind":9.0`), false},
	{"KindExponent", with(`"kind":9`, `"kind":9e0`), false},
	{"KindLeadingZero", with(`"kind":9`, `"kind":09`), false},
	{"KindString", with(`"kind":9`, `"kind":"9"`), false},
	{"TimeNineteenDigits", with(`1700000000`, `1000000000000000000`), false},
	{"TimeTooLarge", with(`1700000000`, `9223372036854775808`), false},
	{"UpperCaseKey", with(`"kind"`, `"Kind"`), false},
	{"UnknownKey", with(`"kind":9`, `"kind":9,"extra":{"a":[1,null]}`), false},
	{"RepeatedKey", with(`"kind":9`, `"kind":9,"kind":10`), false},
	{"MissingKey", with(`"kind":9,`, ``), false},
	{"NullContent", with(`"content":"hi é \"there\"\nbye"`, `"content":null`), false},
	{"NullTag", with(`["h","general"]`, `null`), false},
	{"NullTagValue", with(`["h","general"]`, `["h",null]`), false},
	{"NullTags", with(simpleTags, `null`), false},
	{"NumberInTag", with(`["h","general"]`, `["h",1]`), false},
	{"TagNotArray", with(`["h","general"]`, `"h"`), false},
	{"InvalidUTF8", with(`hi é`, "hi \xff"), false},
	{"EncodedSurrogate", with(`hi é`, "hi \xed\xa0\x80"), false},
	{"EscapedPair", with(`hi é`, `\ud83d\ude00`), false},
	{"LoneSurrogate", with(`hi é`, `\ud83d`), false},
	{"BadEscape", with(`hi é`, `\x41`), false},
	{"ShortUnicodeEscape", with(`hi é`, `\u41"`), false},
	{"ControlCharacter", with(`hi é`, "hi \x01"), false},
	{"UpperCaseHex", with(strings.Repeat("a", 64), strings.Repeat("A", 64)), false},
	{"ShortID", with(strings.Repeat("a", 64), strings.Repeat("a", 63)), false},
	{"TrailingComma", with(`"kind":9`, `"kind":9,`), false},
	{"MissingColon", with(`"kind":9`, `"kind" 9`), false},
	{"TrailingBytes", simpleObject + " x", false},
	{"TwoObjects", simpleObject + simpleObject, false},
	{"Unterminated", simpleObject[:len(simpleObject)-1], false},
	{"UnterminatedString", simpleObject[:40], false},
	{"Array", `[` + simpleObject + `]`, false},
	{"Empty", ``, false},
	{"EmptyObject", `{}`, false},
}

// TestParseSimpleAgrees: parseSimple takes what it should, and whatever
// it takes, the general path decodes to the same event; what it leaves,
// Parse answers as the general path does.
func TestParseSimpleAgrees(t *testing.T) {
	t.Parallel()
	for _, c := range simpleCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			simple, ok := parseSimple([]byte(c.object))
			require.Equal(t, c.simple, ok, "taken by the one-pass path")
			general, gerr := parseGeneral([]byte(c.object))
			if ok {
				require.NoError(t, gerr)
				require.Equal(t, general, simple)
			}
			ev, err := Parse([]byte(c.object))
			require.Equal(t, gerr, err)
			require.Equal(t, general, ev)
		})
	}
	t.Run("Decoded", func(t *testing.T) {
		t.Parallel()
		ev, ok := parseSimple([]byte(with(`hi é`, `\u0041\t\u20ac日`)))
		require.True(t, ok)
		require.Equal(t, "A\t€日 \"there\"\nbye", ev.Content)
		require.Equal(t, Tags{{"h", "general"}, {"e", strings.Repeat("e", 64), "", "root"}, {"p", strings.Repeat("d", 64)}}, ev.Tags)
		require.Equal(t, int64(1700000000), ev.CreatedAt)
		require.Equal(t, 9, ev.Kind)
	})
}

// FuzzParseSimple: on any bytes, whatever parseSimple takes, the general
// path takes too, as the same event.
func FuzzParseSimple(f *testing.F) {
	for _, c := range simpleCases {
		f.Add([]byte(c.object))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		simple, ok := parseSimple(b)
		if !ok {
			return
		}
		general, err := parseGeneral(b)
		if err != nil {
			t.Fatalf("one-pass path took %q, the general path refused it: %v", b, err)
		}
		require.Equal(t, general, simple)
	})
}
