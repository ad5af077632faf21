package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRelay(t *testing.T) {
	t.Parallel()
	id := "0000000000000000000000000000000000000000000000000000000000000001"
	tests := []struct {
		name string
		in   string
		want relayMessage
		err  bool
	}{
		{"OK", `["OK","` + id + `",false,"invalid: x"]`, relayMessage{Type: "OK", EventID: id, Message: "invalid: x"}, false},
		{"EOSE", `["EOSE","s"]`, relayMessage{Type: "EOSE", SubID: "s"}, false},
		{"Closed", `["CLOSED","s","restricted: y"]`, relayMessage{Type: "CLOSED", SubID: "s", Message: "restricted: y"}, false},
		{"Count", `["COUNT","s",{"count":7}]`, relayMessage{Type: "COUNT", SubID: "s", Count: 7}, false},
		{"Auth", `["AUTH","abc"]`, relayMessage{Type: "AUTH", Message: "abc"}, false},
		{"NotArray", `{}`, relayMessage{}, true},
		{"Unknown", `["NOPE"]`, relayMessage{}, true},
		{"OKWithoutBool", `["OK","` + id + `"]`, relayMessage{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseRelay([]byte(tt.in))
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseRelay(f *testing.F) {
	f.Add([]byte(`["EVENT","s",{"id":"x"}]`))
	f.Add([]byte(`["COUNT","s",{"count":1}]`))
	f.Add([]byte(`["OK","a",true,""]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseRelay(b) // must never panic
	})
}
