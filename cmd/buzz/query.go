package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
)

func runQuery(ctx context.Context, a *app, args []string) error {
	c, filters, sk, err := filterCommand(a, "query", args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rc, release, err := connect(ctx, c, sk)
	if err != nil {
		return err
	}
	defer release()
	events, err := rc.Query(ctx, filters...)
	if err != nil {
		return err
	}
	var b []byte
	for i := range events {
		b = events[i].AppendJSON(b[:0])
		if _, err := a.stdout.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// filterCommand parses the flags and filters shared by query and count.
func filterCommand(a *app, name string, args []string) (*common, []event.Filter, []byte, error) {
	fs := newFlagSet(name)
	var c common
	c.register(fs, a.getenv)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, nil, nil, err
	}
	filters, err := readFilters(pos, a.stdin)
	if err != nil {
		return nil, nil, nil, err
	}
	sk, err := secretKey(a.getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	return &c, filters, sk, nil
}

// readFilters parses filters from the arguments, or from stdin when there
// are none or one is "-". Each JSON value is a filter object or an array of
// them.
func readFilters(args []string, stdin io.Reader) ([]event.Filter, error) {
	var filters []event.Filter
	if len(args) == 0 {
		args = []string{"-"}
	}
	for _, arg := range args {
		var src io.Reader = strings.NewReader(arg)
		what := "argument"
		if arg == "-" {
			src, what = stdin, "stdin"
		}
		dec := json.NewDecoder(src)
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, usagef("filters on %s: %v", what, err)
			}
			fs, err := parseFilterValue(raw)
			if err != nil {
				return nil, usagef("filters on %s: %v", what, err)
			}
			filters = append(filters, fs...)
		}
	}
	if len(filters) == 0 {
		return nil, usagef("no filter given (e.g. '{\"kinds\":[9],\"limit\":20}')")
	}
	return filters, nil
}

// parseFilterValue parses one JSON value: a filter object or an array of them.
func parseFilterValue(raw json.RawMessage) ([]event.Filter, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var arr []json.RawMessage
		if err := json.Unmarshal(raw, &arr); err != nil {
			return nil, err
		}
		out := make([]event.Filter, 0, len(arr))
		for i, r := range arr {
			f, err := event.ParseFilter(r)
			if err != nil {
				return nil, fmt.Errorf("filter %d: %w", i, err)
			}
			out = append(out, f)
		}
		return out, nil
	}
	f, err := event.ParseFilter(raw)
	if err != nil {
		return nil, err
	}
	return []event.Filter{f}, nil
}
