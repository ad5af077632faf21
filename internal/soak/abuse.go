package soak

import (
	"context"
	"time"

	"github.com/buzz-relay/buzz/internal/abuse"
	"github.com/buzz-relay/buzz/internal/event"
)

// abuseSeed is how many kind 1 notes the attacked community gets before
// the attacks, at --abuse-scale 1.
const abuseSeed = 2000

// abuseConc is the attacker's requests in flight in the floods: the
// attacker dials from the honest clients' address, so its sockets share
// the relays' per-address connection rate with theirs.
const abuseConc = 8

// abuseFault is the fault: one attacker runs the attacks of
// internal/abuse in turn, each for its share of --abuse-time and a fresh
// key of its own, against the first community on the first relay while
// the ledgered load goes on. It reports the attacker's answers by prefix,
// in all and per attack; the fault's window (and its honest p99) begins
// after the attacked community is seeded.
func (s *soakRun) abuseFault(ctx context.Context, r *faultReport) error {
	target := abuse.Target{URL: s.relays[0].wsURL, Host: s.comms[0].host}
	opts := abuse.DefaultOptions()
	opts.Scale, opts.Concurrency = s.cfg.abuseScale, abuseConc
	seeded, refused := abuse.Seed(ctx, target, max(1, int(abuseSeed*opts.Scale)))
	r.Observed["seeded"], r.Observed["seed_refused"] = seeded, refused
	now := time.Now()
	r.AtS += now.Sub(r.began).Seconds()
	r.began = now

	attacks := abuse.All()
	each := s.cfg.abuseFor / time.Duration(len(attacks))
	total := map[string]int{}
	per := map[string]map[string]int{}
	var first []string
	for _, at := range attacks {
		if ctx.Err() != nil {
			break
		}
		env := &abuse.Env{Target: target, Key: event.GenerateKey(), Opts: opts, Outcomes: abuse.NewOutcomes()}
		actx, cancel := context.WithTimeout(ctx, each)
		err := at.Run(actx, env)
		cancel()
		if err != nil {
			return err
		}
		counts := env.Outcomes.Counts()
		per[at.Name] = counts
		for k, v := range counts {
			total[k] += v
		}
		for _, m := range env.Outcomes.First() {
			if len(first) < 12 && !containsString(first, m) {
				first = append(first, m)
			}
		}
	}
	r.Observed["attacker"] = total
	r.Observed["attacks"] = per
	r.Observed["attacker_messages"] = first
	return nil
}
