package importer_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/export"
	"github.com/buzz-relay/buzz/internal/importer"
)

// file builds an export of n signed events with a matching trailer, as
// its lines, each with its "\n".
func file(t *testing.T, n int) []string {
	t.Helper()
	key := eventtest.NewKey()
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = key.Signed(t, 9, eventtest.Content(strings.Repeat("x", i+1)))
	}
	return exportLines(t, evs)
}

// exportLines is an export of evs with a matching trailer, as its lines,
// each with its "\n".
func exportLines(t *testing.T, evs []event.Event) []string {
	t.Helper()
	head, err := json.Marshal(export.Header{Type: "header", Format: export.Format, Version: export.Version,
		Host: "team.test", Events: int64(len(evs))})
	require.NoError(t, err)
	lines := []string{string(head) + "\n"}
	sum := sha256.New()
	for i := range evs {
		line := string(evs[i].AppendJSON(nil)) + "\n"
		sum.Write([]byte(line))
		lines = append(lines, line)
	}
	tr, err := json.Marshal(export.Trailer{Type: "trailer", Events: int64(len(evs)), SHA256: hex.EncodeToString(sum.Sum(nil))})
	require.NoError(t, err)
	return append(lines, string(tr)+"\n")
}

func verify(lines []string) error {
	_, _, err := importer.Verify(strings.NewReader(strings.Join(lines, "")))
	return err
}

// Each refusal of docs/OPERATIONS.md "Importing a community" names its line.
func TestVerify(t *testing.T) {
	t.Parallel()
	good := file(t, 3)
	h, tr, err := importer.Verify(strings.NewReader(strings.Join(good, "")))
	require.NoError(t, err)
	require.Equal(t, int64(3), h.Events)
	require.Equal(t, int64(3), tr.Events)
	require.NoError(t, verify(file(t, 0)), "an empty community")

	with := func(i int, line string) []string {
		out := append([]string{}, good...)
		out[i] = line
		return out
	}
	otherSig := file(t, 3)[2] // the same content signed by another key: another id
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"Empty", nil, "line 1: the file is empty"},
		{"NotAHeader", with(0, "{}\n"), "line 1: not a buzz-community-export header"},
		{"Version2", with(0, strings.Replace(good[0], `"version":1`, `"version":2`, 1)), "line 1: format version 2 is not supported"},
		{"NotAnEvent", with(2, "hello\n"), "line 3: not an event: "},
		{"ByteChanged", with(2, strings.Replace(good[2], `"xx"`, `"xy"`, 1)), "line 3: the id "},
		{"SignatureSwapped", with(2, good[2][:len(good[2])-130]+otherSig[len(otherSig)-130:]), "line 3: the signature of event "},
		{"EventReplaced", with(2, otherSig), "line 5: the trailer's SHA-256 "},
		{"NoTrailer", good[:4], "line 5: the file ends without a trailer"},
		{"CutLine", append(good[:4:4], good[4][:8]), "line 5: the line has no end"},
		{"TrailerCount", with(4, strings.Replace(good[4], `"events":3`, `"events":2`, 1)), "line 5: the trailer counts 2 events, the file has 3"},
		{"HeaderCount", with(0, strings.Replace(good[0], `"events":3`, `"events":4`, 1)), "line 5: the header counts 4 events, the file has 3"},
		{"AfterTrailer", append(good[:5:5], good[1]), "line 6: data after the trailer"},
	} {
		err := verify(tc.lines)
		var le *importer.LineError
		require.ErrorAs(t, err, &le, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

// A line is bounded by importer.MaxLineBytes: a line of exactly that many
// bytes is read (and refused for what it holds), one byte more is refused
// for its length, naming its line.
func TestVerifyLineCap(t *testing.T) {
	t.Parallel()
	good := file(t, 1)
	with := func(n int) error {
		return verify([]string{good[0], strings.Repeat("x", n) + "\n", good[2]})
	}
	atCap := with(importer.MaxLineBytes)
	require.Error(t, atCap)
	require.NotContains(t, atCap.Error(), "longer than")
	require.Contains(t, atCap.Error(), "line 2")
	over := with(importer.MaxLineBytes + 1)
	require.EqualError(t, over, "line 2: the line is longer than 16777216 bytes")
}
