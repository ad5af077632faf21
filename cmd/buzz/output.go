package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/buzz-relay/buzz/internal/cli"
)

// write prints one output object on its own line. It is the one place
// every command prints a result, so --get applies everywhere alike: with
// it, only the value of that top-level field is printed, a string raw
// (no quotes, like jq -r), anything else as compact JSON. An object
// without the field stops the command with a usage error listing the
// fields it has.
func (a *app) write(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // events keep their text as the relay sent it
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	line := buf.Bytes()
	if a.global.get != "" {
		var err error
		if line, err = field(line, a.global.get); err != nil {
			return err
		}
	}
	_, err := a.stdout.Write(line)
	return err
}

// field returns the line that --get name prints for the JSON object obj.
func field(obj []byte, name string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, cli.Usagef("--get %s: the output is not a JSON object", name)
	}
	var names []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("--get %s: %w", name, err)
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("--get %s: %w", name, err)
		}
		if key != name {
			names = append(names, key)
			continue
		}
		var s string
		if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
			return append([]byte(s), '\n'), nil
		}
		return append(raw, '\n'), nil
	}
	return nil, cli.Usagef("--get %s: the output has no field %s (fields: %s)", name, name, strings.Join(names, ", "))
}
