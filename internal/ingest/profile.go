package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
)

// profileFamily is kind 0 (the nip05 handle) and kind 10100 (the agent's
// channel_add_policy): replaceable events that also set a users fact in the
// same transaction.
type profileFamily struct{ byTag }

func (profileFamily) authorize(_ context.Context, _ *Pipeline, req *Request, rt route) (change, error) {
	ev := &req.Event
	replace, err := newReplace(req, rt.channel)
	if err != nil {
		return nil, err
	}
	c := profileChange{replace: replace}
	switch ev.Kind { // 18
	case event.KindProfile:
		var profile map[string]any
		if err := json.Unmarshal([]byte(ev.Content), &profile); err != nil || profile == nil {
			return nil, invalid("kind:0 content must be valid JSON")
		}
		if nip05, ok := profile["nip05"].(string); ok {
			if name, hostPart, found := strings.Cut(strings.ToLower(strings.TrimSpace(nip05)), "@"); found && name != "" && hostPart == req.Tenant.Host {
				h := name + "@" + hostPart
				c.nip05 = &h
			}
		}
	case event.KindAgentProfile:
		var body struct {
			Policy string `json:"channel_add_policy"`
		}
		if json.Unmarshal([]byte(ev.Content), &body) != nil || (body.Policy != "anyone" && body.Policy != "owner_only" && body.Policy != "nobody") {
			return nil, invalid("kind:10100 content must set channel_add_policy to anyone, owner_only or nobody")
		}
		c.addPolicy = body.Policy
	}
	return c, nil
}

// profileChange is a replacement plus the users fact it sets: the nip05
// handle of a kind 0 (nil clears it) or the add policy of a kind 10100.
type profileChange struct {
	replace   replaceChange
	nip05     *string
	addPolicy string
}

func (c profileChange) apply(ctx context.Context, w writer) (outcome, error) {
	if err := c.replace.replace(ctx, w); err != nil {
		return outcome{}, err
	}
	ev := w.ev()
	if ev.Kind == event.KindProfile {
		if err := w.store().UserSetNIP05(ctx, w.cid(), ev.PubKey, c.nip05); err != nil {
			return outcome{}, fmt.Errorf("set nip05: %w", err)
		}
	}
	if c.addPolicy != "" {
		if err := w.store().UserSetAddPolicy(ctx, w.cid(), ev.PubKey, c.addPolicy); err != nil {
			return outcome{}, fmt.Errorf("set add policy: %w", err)
		}
	}
	return outcome{channel: c.replace.channel}, nil
}
