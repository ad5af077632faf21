package audit_test

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
)

const community1 = "00000000-0000-0000-0000-000000000001"

func ptr(s string) *string { return &s }

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

func ts(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

// The vectors of docs/PROTOCOL.md §13.2, built from their exact inputs.
func vectors(t *testing.T) (a, a1, a2, b, c, d audit.Entry) {
	t.Helper()
	a = audit.Entry{CommunityID: community1, Seq: 1, CreatedAt: ts(t, "2026-01-01T00:00:00Z"), Action: "event_created",
		Actor: bytes.Repeat([]byte{0xab}, 32), ObjectID: ptr("abc123"), Detail: []byte("null"), Version: 2}
	a1 = a
	a1.ObjectID = ptr("")
	a2 = a
	a2.ObjectID = nil
	b = audit.Entry{CommunityID: community1, Seq: 2, CreatedAt: ts(t, "2026-01-01T00:00:00.123456Z"), Action: "member_added",
		ObjectID: ptr(""), Detail: []byte(`{"scope":"channel","role":"member","channel_id":"11111111-1111-1111-1111-111111111111"}`),
		PrevHash: mustHex(t, "e12c899d941af9794679602ae83ef2ab1c8f029fe380349263a046a93374d580"), Version: 2}
	c = audit.Entry{CommunityID: community1, Seq: 3, CreatedAt: ts(t, "2026-01-01T00:00:00.120Z"), Action: "auth_failure",
		Detail:   []byte(`{"method":"nip42","reason":"invalid"}`),
		PrevHash: mustHex(t, "9e19a63036ba8d31fb2e8fdc8fc0b54047c6b150ce0d6030ef4b4d8c4f5b79a9"), Version: 2}
	d = audit.Entry{CommunityID: community1, Seq: 4, CreatedAt: ts(t, "2026-01-01T00:00:01Z"), Action: "event_created",
		Actor: bytes.Repeat([]byte{0xcd}, 32), ObjectID: ptr(strings.Repeat("ab", 32)), Detail: []byte(`{"event_kind":9,"channel_id":null}`),
		PrevHash: mustHex(t, "572e1401c362af8a639b6d16a74268d5b24c6c1c3d4fe80cf843cc8cc30d6fd6"), Version: 2}
	return
}

func hashHex(t *testing.T, e audit.Entry) string {
	t.Helper()
	h, err := audit.Hash(e)
	require.NoError(t, err)
	return hex.EncodeToString(h[:])
}

// Checks 1 and 2.
func TestHashVectors(t *testing.T) {
	t.Parallel()
	a, a1, a2, b, c, d := vectors(t)
	require.Equal(t, "e12c899d941af9794679602ae83ef2ab1c8f029fe380349263a046a93374d580", hashHex(t, a))
	require.Equal(t, "ca702c8d5dcc433f8eb50069527442c2bd06cf6b8e70748949408094c6a6b08e", hashHex(t, a1))
	require.Equal(t, "b12f5b1f3e62266cd135a4d13fa48640fe997485fe8c86ab0adde3c40bbc0399", hashHex(t, a2))
	require.Equal(t, "9e19a63036ba8d31fb2e8fdc8fc0b54047c6b150ce0d6030ef4b4d8c4f5b79a9", hashHex(t, b))
	require.Equal(t, "572e1401c362af8a639b6d16a74268d5b24c6c1c3d4fe80cf843cc8cc30d6fd6", hashHex(t, c))
	require.Equal(t, "57d02284d1be4320f2715367f9abae7cc88a3f9b6d401e5d5e6eec8f5a549897", hashHex(t, d))
	for e, n := range map[*audit.Entry]int{&a: 181, &b: 264, &c: 202} {
		pre, err := audit.PreimageV2(*e)
		require.NoError(t, err)
		require.Len(t, pre, n)
	}
	require.NotEqual(t, hashHex(t, a), hashHex(t, a1))
	require.NotEqual(t, hashHex(t, a), hashHex(t, a2))
	require.NotEqual(t, hashHex(t, a1), hashHex(t, a2))
}

func TestFormatTime(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[time.Time]string{
		base:                                "2026-01-01T00:00:00+00:00",
		base.Add(120 * time.Millisecond):    "2026-01-01T00:00:00.120+00:00",
		base.Add(100000 * time.Microsecond): "2026-01-01T00:00:00.100+00:00",
		base.Add(123400 * time.Microsecond): "2026-01-01T00:00:00.123400+00:00",
		time.Date(2023, 11, 14, 22, 13, 20, 123456789, time.UTC):      "2023-11-14T22:13:20.123456+00:00",
		time.Date(2026, 1, 1, 2, 0, 0, 0, time.FixedZone("", 2*3600)): "2026-01-01T00:00:00+00:00",
	} {
		require.Equal(t, want, audit.FormatTime(in))
	}
	_, _, _, _, _, d := vectors(t)
	fine, coarse := d, d
	fine.CreatedAt = time.Date(2023, 11, 14, 22, 13, 20, 123456789, time.UTC)
	coarse.CreatedAt = time.Date(2023, 11, 14, 22, 13, 20, 123456000, time.UTC)
	require.Equal(t, hashHex(t, coarse), hashHex(t, fine))
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	out, err := audit.Canonical([]byte(`{"z":1,"a":[true,null,"é/\"\n\u001f<>&\u2028"],"m":{"b":2,"a":1}}`))
	require.NoError(t, err)
	require.Equal(t, "7b2261223a5b747275652c6e756c6c2c22c3a92f5c225c6e5c75303031663c3e26e280a8225d2c226d223a7b2261223a312c2262223a327d2c227a223a317d", hex.EncodeToString(out))

	_, _, _, _, _, d := vectors(t)
	x, y := d, d
	x.Detail, y.Detail = []byte(`{"z":1,"a":2}`), []byte(`{"a":2,"z":1}`)
	require.Equal(t, hashHex(t, x), hashHex(t, y))

	x.Detail = []byte(`{"a":1.5}`)
	_, err = audit.Hash(x)
	require.ErrorContains(t, err, "serialization error: ")
	var se *audit.SerializationError
	require.ErrorAs(t, err, &se)

	for _, in := range []string{"", "null"} {
		out, err := audit.Canonical([]byte(in))
		require.NoError(t, err)
		require.Equal(t, "null", string(out))
	}
	for _, in := range []string{`1e3`, `01`, `{"a":-0.0}`, `[1,`, `{} {}`} {
		_, err := audit.Canonical([]byte(in))
		require.ErrorAs(t, err, &se, in)
	}
	out, err = audit.Canonical([]byte("\"\\b\\t\\f\\r\\u0001\u007f\""))
	require.NoError(t, err)
	require.Equal(t, "\"\\b\\t\\f\\r\\u0001\u007f\"", string(out))
}

func TestHashSensitivity(t *testing.T) {
	t.Parallel()
	_, _, _, _, _, d := vectors(t)
	base := hashHex(t, d)
	for name, edit := range map[string]func(e *audit.Entry){
		"Community": func(e *audit.Entry) { e.CommunityID = "00000000-0000-0000-0000-000000000002" },
		"Seq":       func(e *audit.Entry) { e.Seq = 5 },
		"Time":      func(e *audit.Entry) { e.CreatedAt = e.CreatedAt.Add(time.Microsecond) },
		"Action":    func(e *audit.Entry) { e.Action = "event_deleted" },
		"Actor":     func(e *audit.Entry) { e.Actor = bytes.Repeat([]byte{0xce}, 32) },
		"Object":    func(e *audit.Entry) { e.ObjectID = ptr(strings.Repeat("ab", 31) + "ac") },
		"Detail":    func(e *audit.Entry) { e.Detail = []byte(`{"event_kind":7,"channel_id":null}`) },
		"Prev":      func(e *audit.Entry) { e.PrevHash = bytes.Repeat([]byte{1}, 32) },
	} {
		e := d
		edit(&e)
		require.NotEqual(t, base, hashHex(t, e), name)
	}
	// One character moved between object_id and detail.
	x, y := d, d
	x.ObjectID, x.Detail = ptr("record1"), []byte(`23`)
	y.ObjectID, y.Detail = ptr("record12"), []byte(`3`)
	require.NotEqual(t, hashHex(t, x), hashHex(t, y))
}

// The hash inputs and the version dispatch.
func TestActionsAndVersions(t *testing.T) {
	t.Parallel()
	require.Len(t, audit.Actions, 12)
	for _, a := range audit.Actions {
		got, err := audit.ParseAction(string(a))
		require.NoError(t, err)
		require.Equal(t, a, got)
	}
	_, err := audit.ParseAction("bogus")
	require.EqualError(t, err, `unknown audit action: "bogus"`)
	_, _, _, _, _, d := vectors(t)
	for _, v := range []int{1, 99} {
		d.Version = v
		_, err := audit.Hash(d)
		require.EqualError(t, err, "unsupported audit hash version "+map[int]string{1: "1", 99: "99"}[v])
	}
}
