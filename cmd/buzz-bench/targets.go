package main

import (
	"encoding/json"
	"os"

	"github.com/buzz-relay/buzz/internal/event"
)

// reqTargets are the values the REQ shapes draw from: the kind every
// filter names, and the pubkeys (authors), event ids (#e) and mentioned
// pubkeys (#p) that have hits in the dataset. "buzz-bench fixture" writes
// this shape as its --targets file.
type reqTargets struct {
	Kind    int      `json:"kind"`
	Authors []string `json:"authors"`
	E       []string `json:"e"`
	P       []string `json:"p"`
}

// loadTargets reads and checks a --req-targets file.
func loadTargets(path string) (*reqTargets, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errf("--req-targets: %v", err)
	}
	var t reqTargets
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, errf("--req-targets %s: %v", path, err)
	}
	if t.Kind < 0 || len(t.Authors) == 0 || len(t.E) == 0 || len(t.P) == 0 {
		return nil, errf("--req-targets %s: needs a kind and non-empty authors, e and p", path)
	}
	for _, list := range [][]string{t.Authors, t.E, t.P} {
		for _, v := range list {
			if !event.IsHex64(v) {
				return nil, errf("--req-targets %s: %q is not 64 lowercase hex characters", path, v)
			}
		}
	}
	return &t, nil
}
