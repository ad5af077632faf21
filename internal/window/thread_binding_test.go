package window_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/window"
)

// The unit half: both golden vectors of docs/NIP-CW.md §5.5, and
// which changes move the binding.
func TestBindingGoldenVectors(t *testing.T) {
	t.Parallel()
	ab, cd, ef := strings.Repeat("ab", 32), strings.Repeat("cd", 32), strings.Repeat("EF", 32)

	r, err := parseOne(t, `{"thread_window":true,"#h":["00000000-0000-0000-0000-000000000000"],"#e":["`+ab+`"],"kinds":[9]}`)
	require.NoError(t, err)
	require.Equal(t, "tw:1:5252322dfd797ddb1d5f1150acd4cf914b9fc09e39bcf3048d25aed514b3546d",
		window.Binding("relay.example", ab, r))

	r, err = parseOne(t, `{"thread_window":true,"#h":["11111111-2222-4333-8444-555555555555"],"#e":["`+ab+`"],`+
		`"kinds":[40002,9,9],"limit":20,"depth_limit":3,"until":1751500000,"before_id":"`+ef+`","include_aux":true}`)
	require.NoError(t, err)
	require.Equal(t, "tw:1:312d9b825d5b18fada65cb64c2576f9a911ca9c33bd44a6577dc5a1909ed1478",
		window.Binding("relay.example:8443", cd, r))
}

func TestBindingInputs(t *testing.T) {
	t.Parallel()
	ab := strings.Repeat("ab", 32)
	base := `"thread_window":true,"#h":["` + testChannel + `"],"#e":["` + testRoot + `"],"kinds":[9]`
	bind := func(host, reader, extra string) string {
		t.Helper()
		r, err := parseOne(t, "{"+base+extra+"}")
		require.NoError(t, err)
		return window.Binding(host, reader, r)
	}
	def := bind("relay.example", ab, "")
	// Explicit defaults and an uppercase #e give the default binding.
	require.Equal(t, def, bind("relay.example", ab, `,"limit":50,"depth_limit":100,"include_aux":false`))
	r, err := parseOne(t, `{"thread_window":true,"#h":["`+strings.ToUpper(testChannel)+`"],"#e":["`+strings.ToUpper(testRoot)+`"],"kinds":[9,9]}`)
	require.NoError(t, err)
	require.Equal(t, def, window.Binding("relay.example", ab, r))

	seen := map[string]string{def: "default"}
	for name, got := range map[string]string{
		"host":    bind("relay.example:8443", ab, ""),
		"reader":  bind("relay.example", strings.Repeat("cd", 32), ""),
		"limit":   bind("relay.example", ab, `,"limit":49`),
		"depth":   bind("relay.example", ab, `,"depth_limit":99`),
		"kinds":   bind("relay.example", ab, `,"kinds":[9,40002]`),
		"cursor":  bind("relay.example", ab, `,"until":1,"before_id":"`+ab+`"`),
		"cursor2": bind("relay.example", ab, `,"until":2,"before_id":"`+ab+`"`),
		"aux":     bind("relay.example", ab, `,"include_aux":true`),
	} {
		require.NotContains(t, seen, got, name)
		seen[got] = name
	}
	other := strings.Replace(base, testChannel, "11111111-2222-4333-8444-555555555556", 1)
	r, err = parseOne(t, "{"+other+"}")
	require.NoError(t, err)
	require.NotContains(t, seen, window.Binding("relay.example", ab, r), "channel")
	other = strings.Replace(base, testRoot, strings.Repeat("cd", 32), 1)
	r, err = parseOne(t, "{"+other+"}")
	require.NoError(t, err)
	require.NotContains(t, seen, window.Binding("relay.example", ab, r), "root")
}
