package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/wire"
)

// channelExempt kinds skip step 14: their own rules decide.
var channelExempt = event.KindSet{9002: {}, 9005: {}, 9007: {}, 9008: {}, 9021: {}, 40003: {}}

// authorize runs steps 9–19: the generic steps here, the family's own
// through its registration. Store failures come back wrapped with the step
// and family; refusals come back as they are.
func (p *Pipeline) authorize(ctx context.Context, req *Request) (*registration, change, error) {
	ev := &req.Event
	if !event.IsAccepted(ev.Kind) { // 9
		return nil, nil, reject(wire.Restricted, "unknown event kind")
	}
	reg := familyOf(ev.Kind)
	rt, err := reg.family.route(ctx, p, req) // 10, 11
	if err != nil {
		return nil, nil, during("authorize", reg.name, err)
	}
	if err := p.channelRules(ctx, req, rt.channel); err != nil { // 12–15
		return nil, nil, during("authorize", reg.name, err)
	}
	c, err := reg.family.authorize(ctx, p, req, rt) // 16–19
	if err != nil {
		return nil, nil, during("authorize", reg.name, err)
	}
	return reg, c, nil
}

// channelRules are steps 12–15, the same for every family.
func (p *Pipeline) channelRules(ctx context.Context, req *Request, channel string) error {
	ev := &req.Event
	if event.RequiresH.Has(ev.Kind) && channel == "" { // 12
		return invalid("channel-scoped events must include an h tag")
	}
	if ev.Kind == event.KindDeletion || ev.Kind == event.KindDeleteEvent { // 13
		ne, na := ev.Tags.Count("e"), ev.Tags.Count("a")
		if ne+na != 1 {
			return invalid("deletion events must reference exactly one target via e or a tag (got e=%d, a=%d)", ne, na)
		}
	}
	if channel == "" || channelExempt.Has(ev.Kind) {
		return nil
	}
	return p.mayPost(ctx, req, channel) // 14, 15
}

// mayPost is steps 14 and 15: the author is an active member or the
// channel is open, and the channel is not archived. An author who passed
// them recently in this channel is left to the write, which checks the
// same rule (posters.go); the others are read now.
func (p *Pipeline) mayPost(ctx context.Context, req *Request, channel string) error {
	if p.posters.passed(posterKey{req.Tenant.CommunityID, channel, req.Event.PubKey}) {
		req.posterCheck = channel
		return nil
	}
	return p.readPoster(ctx, req, channel)
}

// readPoster is steps 14 and 15 read from the channel's state, with the
// answer that names the rule that refused.
func (p *Pipeline) readPoster(ctx context.Context, req *Request, channel string) error {
	p.cfg.Metrics.PosterChecks.WithLabelValues("read").Inc()
	st, err := p.st.ChannelStateGet(ctx, req.Tenant.CommunityID, channel, req.Event.PubKey)
	if err != nil {
		return fmt.Errorf("channel access %s: %w", channel, err)
	}
	if !st.CanPost() {
		return reject(wire.Restricted, "not a channel member")
	}
	if st.Archived {
		return invalid("channel is archived")
	}
	p.posters.pass(posterKey{req.Tenant.CommunityID, channel, req.Event.PubKey})
	return nil
}

// settlePoster reads now the steps 14 and 15 that mayPost left to the
// write, when the change c will not make that write: a change that is not
// one statement, or one of another channel.
func (p *Pipeline) settlePoster(ctx context.Context, req *Request, c change) error {
	ch := req.posterCheck
	if ch == "" {
		return nil
	}
	if pc, one := c.(plainChange); one && pc.channel == ch {
		return nil
	}
	req.posterCheck = ""
	return p.readPoster(ctx, req, ch)
}

// channelFromTags returns the first h value that is a hyphenated UUID,
// lowercased, or "".
func channelFromTags(tags event.Tags) string {
	for _, t := range tags {
		if len(t) > 1 && t[0] == "h" {
			if id, ok := event.ChannelID(t[1]); ok {
				return id
			}
		}
	}
	return ""
}

func firstHex64(tags event.Tags, name string) string {
	for _, t := range tags {
		if len(t) > 1 && t[0] == name && event.IsHexAnyCase64(t[1]) {
			return strings.ToLower(t[1])
		}
	}
	return ""
}

// commitPosted is commit for a change whose poster check may be left to
// its write. When the write refused what the poster cache let through, the
// pass is forgotten and the channel's state read: its refusal is the
// answer, or, if the author may post after all (re-added in between), the
// change is written again.
func (p *Pipeline) commitPosted(ctx context.Context, req *Request, reg *registration, c change) (outcome, error) {
	out, err := p.commit(ctx, req, reg, c)
	if !errors.Is(err, errPosterRefused) {
		return out, err
	}
	p.cfg.Metrics.PosterChecks.WithLabelValues("refused_by_write").Inc()
	ch := req.posterCheck
	req.posterCheck = ""
	p.posters.dropChannel(req.Tenant.CommunityID, ch, req.Event.PubKey)
	if err := p.readPoster(ctx, req, ch); err != nil {
		var r *refusal
		if errors.As(err, &r) {
			return outcome{}, err
		}
		// A failed read wrote nothing: not a commit whose answer was lost.
		return outcome{}, fmt.Errorf("after a refused write: %v", err) //nolint:errorlint // the chain is cut on purpose
	}
	return p.commit(ctx, req, reg, c)
}
