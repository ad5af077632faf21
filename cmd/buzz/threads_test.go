package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

func TestThreadArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{"OK", []string{"--root", testID, "--channel", testChannel}, false},
		{"NoRoot", []string{"--channel", testChannel}, true},
		{"NoChannel", []string{"--root", testID}, true},
		{"BadRoot", []string{"--root", "x", "--channel", testChannel}, true},
		{"Positional", []string{"--root", testID, "--channel", testChannel, "more"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := &threadArgs{}
			err := parseArgs(o, tt.args...)
			if tt.wantErr {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			fs := o.filters()
			require.Len(t, fs, 2)
			require.JSONEq(t, `{"kinds":[9,40002],"#e":["`+testID+`"],"#h":["`+testChannel+`"]}`, string(fs[0].AppendJSON(nil)))
			require.JSONEq(t, `{"ids":["`+testID+`"]}`, string(fs[1].AppendJSON(nil)))
		})
	}
}

func TestSplitThread(t *testing.T) {
	t.Parallel()
	root := event.Event{ID: testID, CreatedAt: 10}
	r1 := event.Event{ID: "r1", CreatedAt: 12}
	r2 := event.Event{ID: "r2", CreatedAt: 11}

	gotRoot, replies, ok := splitThread(testID, []event.Event{r1, root, r2, r1})
	require.True(t, ok)
	require.Equal(t, root, gotRoot)
	require.Equal(t, []event.Event{r2, r1}, replies)

	_, replies, ok = splitThread(testID, []event.Event{r1})
	require.False(t, ok)
	require.Equal(t, []event.Event{r1}, replies)
}
